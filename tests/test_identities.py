"""Secrets only where they are used (issue 23 item 4): per environment, which Kubernetes identity (the ServiceAccount
of a Pod Identity association) may read which Secrets Manager secret and which S3 prefix, and write which, read
from the synthesized template's IAM policies. Each table is the whole truth: an identity or a grant it does not
list fails the test."""

from __future__ import annotations

import re
from typing import Any

import pytest

from llm_eks.infra.review import readable
from llm_eks.manifests.benchmark import TOKENIZER_FILES
from llm_eks.manifests.weights_staging import MARKERS

# An object ARN in the weights bucket, as the bucket's own construct or an imported one (by name) writes it.
_IN_BUCKET = re.compile(
    r"^(?:\$\{GetAtt:WeightsBucket[0-9A-F]+\.Arn\}|arn:\$\{Ref:AWS::Partition\}:s3:::\$\{Ref:WeightsBucket[0-9A-F]+\})/"
)


def _access(template: dict[str, Any]) -> dict[str, dict[str, set[str]]]:
    """`namespace/serviceaccount` -> {"secrets": names, "read": S3 keys, "write": S3 keys, "sign": whether it may
    sign with a KMS key} for every workload identity (the add-ons' controller roles are left out: they are checked
    with their constructs)."""
    resources = template["Resources"]
    roles: dict[str, str] = {}
    for r in resources.values():
        if r["Type"] == "AWS::EKS::PodIdentityAssociation":
            props = r["Properties"]
            role = props["RoleArn"]["Fn::GetAtt"][0]
            roles[role] = f"{props['Namespace']}/{props['ServiceAccount']}"
    table: dict[str, dict[str, set[str]]] = {}
    for r in resources.values():
        if r["Type"] != "AWS::IAM::Policy":
            continue
        for ref in r["Properties"]["Roles"]:
            who = roles.get(ref["Ref"])
            if who is None or not who.startswith("inference"):
                continue
            grants = table.setdefault(who, {"secrets": set(), "read": set(), "write": set(), "sign": set()})
            for statement in r["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                texts = [str(readable(t)) for t in targets]
                if "secretsmanager:GetSecretValue" in actions:
                    grants["secrets"] |= {re.sub(r"^.*:secret:(.+)-\?{6}$", r"\1", t) for t in texts}
                keys = {_IN_BUCKET.sub("", t) for t in texts if _IN_BUCKET.match(t)}
                if "s3:GetObject" in actions:
                    grants["read"] |= keys
                if "s3:PutObject" in actions:
                    grants["write"] |= keys
                if "kms:Sign" in actions:
                    grants["sign"] |= {"cache-signing-key"}
    return table


LLAMA_8B = "models/meta-llama/Llama-3.1-8B-Instruct/main/"
CACHE = "compile-cache/vllm-llama-3-1-8b-instruct/g5/"
TOKENIZER = {f"{LLAMA_8B}{name}" for name in TOKENIZER_FILES}


def test_dev_identities_read_only_what_their_job_needs(templates: dict[str, Any]) -> None:
    access = _access(templates["dev"])
    serving = "inference/vllm-llama-3-1-8b-instruct"
    # The one staging key's marker and in-progress record (staging-markers/<prefix><key>*).
    (marker,) = (k for k in access[serving]["read"] if k.startswith(MARKERS))
    assert re.fullmatch(rf"{MARKERS}{re.escape(LLAMA_8B)}[0-9a-f]{{10}}\*", marker), marker
    assert access == {
        # The serving pods stream the staged weights once their key's marker is there, and read the API key: no
        # Hub token (staging downloaded), and the compile cache is theirs to read and verify, never to write or
        # sign.
        serving: {
            "secrets": {"llm-eks/dev/api-key"},
            "read": {f"{LLAMA_8B}*", marker, f"{CACHE}*"},
            "write": set(),
            "sign": set(),
        },
        # The compile-cache Job: serves nothing, holds no secret, streams the staged weights as a replica does,
        # adds to the cache and signs its manifest.
        f"{serving}-compile-cache": {
            "secrets": set(),
            "read": {f"{LLAMA_8B}*", marker, f"{CACHE}*"},
            "write": {f"{CACHE}*"},
            "sign": {"cache-signing-key"},
        },
        # The staging Job: the Hub token, the model's prefix and its markers, nothing served.
        "inference/stage-llama-3-1-8b-instruct": {
            "secrets": {"llm-eks/dev/hf-token"},
            "read": {f"{LLAMA_8B}*", f"{MARKERS}{LLAMA_8B}*"},
            "write": {f"{LLAMA_8B}*", f"{MARKERS}{LLAMA_8B}*"},
            "sign": set(),
        },
        # The benchmark: the API key and the tokenizer files only.
        "inference/bench-llama-3-1-8b-instruct": {
            "secrets": {"llm-eks/dev/api-key"},
            "read": TOKENIZER,
            "write": set(),
            "sign": set(),
        },
    }


@pytest.mark.parametrize("env", ["staging", "prod"])
def test_no_serving_identity_reads_the_hub_token_or_writes_with_staged_weights(
    templates: dict[str, Any], env: str
) -> None:
    access = _access(templates[env])
    for who, grants in access.items():
        reads_token = any(name.endswith("/hf-token") for name in grants["secrets"])
        assert reads_token == ("/stage-" in who), (who, grants["secrets"])
        if "/bench-" in who:
            assert not grants["write"] and all(not k.endswith("*") for k in grants["read"]), who
        # Only the staging Job and the compile-cache writer write anything; only the writer signs.
        writes = "/stage-" in who or who.endswith("-compile-cache")
        assert bool(grants["write"]) == writes, (who, grants["write"])
        assert bool(grants["sign"]) == who.endswith("-compile-cache"), who


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_api_key_secret_says_truly_why_it_needs_no_customer_managed_key(
    templates: dict[str, Any], env: str
) -> None:
    """Its checkov reason: IAM alone picks the readers, Pod Identity roles granted this secret by name. Every
    policy in the template that reads it (and no other kind of grant) is one such role's: the workload that checks
    the key and its benchmark, no wildcard."""
    from llm_eks.constructs.api_key import NO_CMK_REASON

    resources = templates[env]["Resources"]
    (secret,) = [r for r in resources.values() if r["Type"] == "AWS::SecretsManager::Secret"]
    name = secret["Properties"]["Name"]
    assert {"id": "CKV_AWS_149", "comment": NO_CMK_REASON} in secret["Metadata"]["checkov"]["skip"]
    pod_identity = {
        r["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        for r in resources.values()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation"
    }
    readers = set()
    for r in resources.values():
        if r["Type"] != "AWS::IAM::Policy":
            continue
        for statement in r["Properties"]["PolicyDocument"]["Statement"]:
            targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            if any(name in str(readable(t)) or str(readable(t)).endswith("secret:*") for t in targets):
                assert [str(readable(t)).rsplit(":secret:", 1)[1] for t in targets] == [f"{name}-??????"]
                readers |= {ref["Ref"] for ref in r["Properties"]["Roles"]}
    assert readers and readers <= pod_identity
    accounts = {
        r["Properties"]["ServiceAccount"]
        for r in resources.values()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation" and r["Properties"]["RoleArn"]["Fn::GetAtt"][0] in readers
    }
    assert {a.split("-")[0] for a in accounts} == {"vllm", "bench"}
