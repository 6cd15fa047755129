"""The CDK app that deploys the async task framework, one stack per environment."""

import os

# jsii prints a banner on Node releases it no longer supports; the value is the
# major version to stay quiet about, and must be set before aws_cdk is imported.
for _variable in ("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION"):
    os.environ.setdefault(_variable, "18,20")
