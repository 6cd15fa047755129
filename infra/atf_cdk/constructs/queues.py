"""One SQS queue per (lambda, priority), each with its dead-letter queue, from atf_core.definitions.

A lambda's queues live in that lambda's nested stack (lambda_stack.py); the consumer,
in the environment's stack, is granted every lambda's."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from atf_cdk.builders import grant_key, secure_queue
from atf_cdk.grants import service_actions
from atf_core.definitions import QueueSpec

# The consumer sends to every queue, each named: IAM takes 6,144 characters per managed policy
# (10,240 inline per role in all) and a queue's ARN is up to ~130 of them.
QUEUES_PER_POLICY = 40
# IAM attaches at most 10 managed policies to a role unless the account's quota is raised.
MANAGED_POLICIES_PER_ROLE = 10


@dataclass(frozen=True)
class TaskQueue:
    spec: QueueSpec
    queue: sqs.Queue
    dead_letter: sqs.Queue


def _construct_id(spec: QueueSpec) -> str:
    return "".join(part.capitalize() for part in spec.label.replace("_", "-").split("-"))


class TaskQueues(Construct):
    def __init__(self, scope: Construct, id: str, *, specs: list[QueueSpec], key: kms.IKey) -> None:
        super().__init__(scope, id)
        self.key = key
        self.queues: list[TaskQueue] = []
        for spec in specs:
            group = Construct(self, _construct_id(spec))
            dead_letter = secure_queue(
                group,
                "DeadLetter",
                name=spec.dead_letter_name,
                key=key,
                retention_s=spec.dead_letter_retention_s,
            )
            queue = secure_queue(
                group,
                "Queue",
                name=spec.name,
                key=key,
                retention_s=spec.retention_s,
                visibility_timeout_s=spec.visibility_timeout_s,
                dead_letter=sqs.DeadLetterQueue(queue=dead_letter, max_receive_count=spec.max_receive_count),
            )
            self.queues.append(TaskQueue(spec, queue, dead_letter))

    def grant_worker(self, grantee: iam.IGrantable) -> None:
        """What the worker hosts' code calls on queues (atf_cdk.grants), on these queues."""
        grant_queues(grantee, self.queues, self.key, service_actions("worker", "sqs"), write=False)


def grant_consumer(
    scope: Construct, role: iam.IRole, queues: list[TaskQueue], key: kms.IKey
) -> list[iam.ManagedPolicy]:
    """What the consumer's code calls on queues (atf_cdk.grants), on every queue by its ARN, in managed
    policies of QUEUES_PER_POLICY queues: one inline policy would outgrow IAM's limit at a few dozen lambdas."""
    chunks = [queues[start : start + QUEUES_PER_POLICY] for start in range(0, len(queues), QUEUES_PER_POLICY)]
    if len(chunks) > MANAGED_POLICIES_PER_ROLE - 1:  # one left for anyone who attaches their own
        raise ValueError(
            f"{len(queues)} queues need {len(chunks)} managed policies on the consumer's role, over IAM's default "
            f"quota of {MANAGED_POLICIES_PER_ROLE}: fewer lambdas or priorities per environment"
        )
    actions = service_actions("consumer", "sqs")
    policies = [
        iam.ManagedPolicy(
            scope,
            f"ConsumerQueues{number}",
            description=f"The store consumer sends to these {len(chunk)} task queues",
            statements=[iam.PolicyStatement(actions=actions, resources=[q.queue.queue_arn for q in chunk])],
            roles=[role],
        )
        for number, chunk in enumerate(chunks)
    ]
    grant_key(key, role, write=True, services=("sqs",))
    return policies


def grant_queues(
    grantee: iam.IGrantable, queues: list[TaskQueue], key: kms.IKey, actions: list[str], *, write: bool
) -> None:
    if not queues:
        return
    iam.Grant.add_to_principal(grantee=grantee, actions=actions, resource_arns=[q.queue.queue_arn for q in queues])
    grant_key(key, grantee, write=write, services=("sqs",))
