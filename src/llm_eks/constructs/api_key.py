"""`GeneratedApiKey`: a Secrets Manager secret whose value Secrets Manager generates, the OpenAI endpoint's API key.

The template holds only the generator's settings (`GenerateSecretString`), never the value. Pods read it as a file
through the Secrets Store CSI driver (SecretsStoreCsi.add_secret_reader); people read it with
`aws secretsmanager get-secret-value`.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from llm_eks import aws_ids
from llm_eks.constructs.nag import acknowledge, skip_checkov
from llm_eks.error_codes import E308
from llm_eks.errors import fail, named_errors


@dataclass(frozen=True)
class GeneratedApiKeyProps:
    """The secret's name and the key's shape."""

    # Fixed and readable (llm-eks/<env>/api-key): the chart's SecretProviderClass and the docs' command name it.
    secret_name: str
    # 48 letters and digits: about 285 bits, far beyond guessing, with nothing a shell or an HTTP header must escape.
    length: int = 48


# Why the secret needs no customer managed key (checkov CKV_AWS_149): IAM alone decides who reads it.
NO_CMK_REASON = (
    "aws/secretsmanager key: IAM alone picks the readers, Pod Identity roles granted this secret by name; a CMK adds "
    "cost, not a narrower reader."
)


class GeneratedApiKey(Construct):
    """The secret, encrypted with the account's aws/secretsmanager key: only IAM decides who reads it, and its
    readers are the Pod Identity roles granted it by name (`SecretsStoreCsi.add_secret_reader`: each workload that
    checks the key, and that workload's benchmark Job). A customer managed key would add cost, not a narrower
    reader."""

    @named_errors
    def __init__(self, scope: Construct, id: str, props: GeneratedApiKeyProps) -> None:
        super().__init__(scope, id)
        if props.secret_name.startswith("arn:") or not aws_ids.SECRET_NAME.match(props.secret_name):
            raise fail(
                E308, "api_key.secret_name", props.secret_name, "must be a Secrets Manager secret name, not an ARN"
            )
        if not 32 <= props.length <= 4096:
            raise fail(E308, "api_key.length", props.length, "must be 32 to 4096 characters")
        self.secret_name = props.secret_name
        self.secret = secretsmanager.Secret(
            self,
            "Secret",
            secret_name=props.secret_name,
            description="API key of the llm-eks OpenAI-compatible endpoint (Authorization: Bearer <key>)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=props.length, exclude_punctuation=True, include_space=False
            ),
        )
        acknowledge(
            self.secret,
            "SMG4",
            "vLLM reads the key once at start; rotate by hand (put-secret-value, then a rollout) so clients and pods "
            "switch together",
        )
        skip_checkov(self.secret, "CKV_AWS_149", NO_CMK_REASON)
