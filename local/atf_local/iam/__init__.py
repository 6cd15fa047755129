"""IAM on the embedded AWS: every component of the local stack runs under its own role, holding
exactly the statements the synthesized CloudFormation template gives that component's role.

template: synthesize (cached) and read the template; roles: the statements of each component's
role, translated where moto evaluates differently from AWS; accounts: the operator, the roles,
enforcement and the credentials of each component.
"""
