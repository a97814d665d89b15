"""`WeightsBucket`: the environment-owned, KMS-encrypted model-weights bucket and its reader/stager grants, as a
reviewer checks them in the synthesized template.

One module-scoped synth of an env-agnostic stack (as the default environments are) with a minimal aws_eks_v2
cluster, one bucket, one reader and one stager, cdk-nag AwsSolutions attached. The cluster is scaffolding: its own
findings are ignored, every other finding fails the test.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, cast

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam

from llm_eks.constructs.addons import PodIdentityRole
from llm_eks.constructs.model_access import ModelWeightsAccessOptions
from llm_eks.constructs.weights_bucket import WeightsBucket, WeightsBucketOptions, WeightsBucketProps
from llm_eks.error_codes import E305
from llm_eks.errors import ConfigError
from llm_eks.infra.review import readable
from tests.cdk_fixtures import minimal_cluster, nag_findings, synth_with_nag
from tests.coded import raises_code

STACK = "Weights"
READER = ("inference", "vllm-llama-3-1-8b")
READ_PREFIX = "models/meta-llama/Llama-3.1-8B-Instruct/"
STAGER = ("inference", "stage-weights")
STAGE_PREFIX = "models/"
ENDPOINT = "vpce-0abc12345def67890"
ADMIN = "arn:aws:iam::123456789012:role/platform-admin"
VIA_S3 = {"StringEquals": {"kms:ViaService": "s3.${Ref:AWS::Region}.amazonaws.com"}}


class Synth:
    def __init__(self) -> None:
        with tempfile.TemporaryDirectory(prefix="weights-") as tmp:
            self._synth(Path(tmp))

    def _synth(self, outdir: Path) -> None:
        app = cdk.App(outdir=str(outdir))
        stack = cdk.Stack(app, STACK)  # env-agnostic: the account, and so any bucket name, is unknown at synth
        weights = WeightsBucket(
            stack,
            "Weights",
            WeightsBucketProps(
                cluster=minimal_cluster(stack), vpc_endpoint_ids=(ENDPOINT,), outside_vpc_role_arns=(ADMIN,)
            ),
        )
        self.reader = weights.add_reader(*READER, READ_PREFIX)
        self.stager = weights.add_stager(*STAGER, STAGE_PREFIX)
        # Asking again for the same grant hands back the same identity and adds nothing.
        self.reader_again = weights.add_reader(*READER, READ_PREFIX)
        self.stager_again = weights.add_stager(*STAGER, STAGE_PREFIX)
        self.weights = weights

        def logical_id(construct: Any) -> str:
            resource = construct if isinstance(construct, cdk.CfnResource) else construct.node.default_child
            return str(stack.resolve(stack.get_logical_id(resource)))

        self.bucket_id = logical_id(weights.bucket)
        self.key_id = logical_id(weights.key)
        self.reader_role_id = logical_id(self.reader.role)
        self.stager_role_id = logical_id(self.stager.role)
        # Every CloudFormation resource the bucket and the two grants add (the cluster is not ours).
        self.ours = {
            logical_id(c)
            for root in (weights, self.reader, self.stager)
            for c in root.node.find_all()
            if isinstance(c, cdk.CfnResource)
        }
        self.tokens = {
            "bucket_name": stack.resolve(weights.bucket_name),
            "bucket_arn": stack.resolve(weights.bucket_arn),
        }
        self.report = synth_with_nag(app)
        self.template_path = outdir / f"{STACK}.template.json"
        self.template: dict[str, Any] = json.loads(self.template_path.read_text())

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.template["Resources"].items() if r["Type"] == type_}

    def role_statements(self, role_logical_id: str) -> list[dict[str, Any]]:
        """The role's statements, intrinsics made readable (`${Ref:X}`, `${GetAtt:X.Arn}`)."""
        statements = []
        for policy in self.resources("AWS::IAM::Policy").values():
            if {"Ref": role_logical_id} in policy["Properties"]["Roles"]:
                statements += policy["Properties"]["PolicyDocument"]["Statement"]
        return [readable(s) for s in statements]


@pytest.fixture(scope="module")
def synth() -> Synth:
    return Synth()


def _one(synth: Synth, type_: str) -> dict[str, Any]:
    (resource,) = synth.resources(type_).values()
    return resource


# -- The bucket and its key --------------------------------------------------------------------------------------


def test_bucket_is_sse_kms_with_its_own_key_and_a_bucket_key(synth: Synth) -> None:
    bucket = synth.template["Resources"][synth.bucket_id]
    assert bucket["Properties"]["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [
            {
                "BucketKeyEnabled": True,
                "ServerSideEncryptionByDefault": {
                    "KMSMasterKeyID": {"Fn::GetAtt": [synth.key_id, "Arn"]},
                    "SSEAlgorithm": "aws:kms",
                },
            }
        ]
    }


def test_key_rotates_and_is_kept_with_the_bucket(synth: Synth) -> None:
    key = _one(synth, "AWS::KMS::Key")
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["Properties"]["PendingWindowInDays"] == 30
    assert (key["DeletionPolicy"], key["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert not synth.resources("AWS::KMS::Alias"), "no alias unless asked for: aliases collide within an account"


def test_bucket_is_retained_unnamed_and_versioned(synth: Synth) -> None:
    bucket = synth.template["Resources"][synth.bucket_id]
    assert (bucket["DeletionPolicy"], bucket["UpdateReplacePolicy"]) == ("Retain", "Retain")
    # CloudFormation names it: S3 names are global, and an env-agnostic synth cannot know the account.
    assert "BucketName" not in bucket["Properties"]
    # An overwrite or a delete leaves the old version (expired after 30 days, below).
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    assert "LoggingConfiguration" not in bucket["Properties"]
    # No auto-delete custom resource (one more Lambda) either.
    assert not [t for t in (r["Type"] for r in synth.template["Resources"].values()) if "AutoDelete" in t]
    assert synth.tokens == {
        "bucket_name": {"Ref": synth.bucket_id},
        "bucket_arn": {"Fn::GetAtt": [synth.bucket_id, "Arn"]},
    }


def test_bucket_blocks_public_access_and_acls(synth: Synth) -> None:
    properties = synth.template["Resources"][synth.bucket_id]["Properties"]
    assert properties["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert properties["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}


def test_bucket_policy_denies_plain_http_old_tls_cache_overwrites_and_requests_from_outside_the_vpc(
    synth: Synth,
) -> None:
    policy = _one(synth, "AWS::S3::BucketPolicy")
    assert policy["Properties"]["Bucket"] == {"Ref": synth.bucket_id}
    arn = f"${{GetAtt:{synth.bucket_id}.Arn}}"
    everything = [arn, f"{arn}/*"]
    deny = {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:*", "Resource": everything}
    assert readable(policy["Properties"]["PolicyDocument"]["Statement"]) == [
        {**deny, "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
        {**deny, "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}}},
        {
            "Sid": "DenyOverwritesOfTheCompileCache",
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Action": "s3:PutObject",
            "Resource": f"{arn}/compile-cache/*",
            "Condition": {"Null": {"s3:if-none-match": "true"}, "Bool": {"s3:ObjectCreationOperation": "true"}},
        },
        # One marker per staging key, written once: a new key never replaces the running one's.
        {
            "Sid": "DenyOverwritesOfStagingMarkers",
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Action": "s3:PutObject",
            "Resource": f"{arn}/staging-markers/*.json",
            "Condition": {"Null": {"s3:if-none-match": "true"}, "Bool": {"s3:ObjectCreationOperation": "true"}},
        },
        {
            "Sid": "DenyObjectAccessOutsideTheVpc",
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Action": [
                "s3:GetObject*",
                "s3:PutObject*",
                "s3:DeleteObject*",
                "s3:RestoreObject",
                "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts",
                "s3:ListBucket",
                "s3:ListBucketVersions",
                "s3:ListBucketMultipartUploads",
            ],
            "Resource": everything,
            "Condition": {
                "StringNotEquals": {"aws:SourceVpce": [ENDPOINT]},
                "ArnNotEquals": {"aws:PrincipalArn": [ADMIN]},
            },
        },
    ]


def test_incomplete_uploads_are_aborted_after_a_week_and_old_versions_expire_after_a_month(synth: Synth) -> None:
    properties = synth.template["Resources"][synth.bucket_id]["Properties"]
    assert properties["LifecycleConfiguration"] == {
        "Rules": [
            {
                "Id": "AbortIncompleteMultipartUploads",
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
                "Status": "Enabled",
            },
            {
                "Id": "ExpireOldVersions",
                "ExpiredObjectDeleteMarker": True,
                "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
                "Status": "Enabled",
            },
        ]
    }


# -- Grants ------------------------------------------------------------------------------------------------------


def test_reader_reads_only_its_prefix(synth: Synth) -> None:
    bucket = f"arn:${{Ref:AWS::Partition}}:s3:::${{Ref:{synth.bucket_id}}}"
    assert synth.role_statements(synth.reader_role_id) == [
        {
            "Sid": "ReadModelWeights",
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": f"{bucket}/{READ_PREFIX}*",
        },
        {
            "Sid": "ListModelWeights",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": bucket,
            "Condition": {"StringLike": {"s3:prefix": [READ_PREFIX, f"{READ_PREFIX}*"]}},
        },
        {
            "Sid": "DecryptModelWeights",
            "Effect": "Allow",
            "Action": "kms:Decrypt",
            "Resource": f"${{GetAtt:{synth.key_id}.Arn}}",
            "Condition": VIA_S3,
        },
    ]


def test_stager_adds_under_its_prefix_and_never_deletes(synth: Synth) -> None:
    bucket = f"${{GetAtt:{synth.bucket_id}.Arn}}"
    assert synth.role_statements(synth.stager_role_id) == [
        {
            "Sid": "StageModelWeightsModels",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
            "Resource": f"{bucket}/{STAGE_PREFIX}*",
        },
        {
            "Sid": "ListStagedModelWeightsModels",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": bucket,
            "Condition": {"StringLike": {"s3:prefix": [STAGE_PREFIX, f"{STAGE_PREFIX}*"]}},
        },
        {
            "Sid": "EncryptStagedModelWeightsModels",
            "Effect": "Allow",
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
            "Resource": f"${{GetAtt:{synth.key_id}.Arn}}",
            "Condition": VIA_S3,
        },
        # Its staging markers: one per key, beside the other keys' of the same prefix.
        {
            "Sid": "StageModelWeightsStagingMarkersModels",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
            "Resource": f"{bucket}/staging-markers/{STAGE_PREFIX}*",
        },
        {
            "Sid": "ListStagedModelWeightsStagingMarkersModels",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": bucket,
            "Condition": {
                "StringLike": {"s3:prefix": [f"staging-markers/{STAGE_PREFIX}", f"staging-markers/{STAGE_PREFIX}*"]}
            },
        },
        {
            "Sid": "EncryptStagedModelWeightsStagingMarkersModels",
            "Effect": "Allow",
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
            "Resource": f"${{GetAtt:{synth.key_id}.Arn}}",
            "Condition": VIA_S3,
        },
    ]


def test_grants_return_the_service_accounts_pod_identity(synth: Synth) -> None:
    assert isinstance(synth.reader, PodIdentityRole) and isinstance(synth.stager, PodIdentityRole)
    assert synth.reader_again is synth.reader and synth.stager_again is synth.stager
    associations = {
        (r["Properties"]["Namespace"], r["Properties"]["ServiceAccount"]): r["Properties"]["RoleArn"]
        for r in synth.resources("AWS::EKS::PodIdentityAssociation").values()
    }
    assert associations == {
        READER: {"Fn::GetAtt": [synth.reader_role_id, "Arn"]},
        STAGER: {"Fn::GetAtt": [synth.stager_role_id, "Arn"]},
    }


def test_no_cdk_nag_findings_outside_the_test_cluster_but_unrecorded_access(synth: Synth) -> None:
    """A bucket alone records no object access: cdk-nag's S1 stays until a trail records it (ObjectAccessTrail
    acknowledges it on each bucket it records; the stack always adds one, or says which trail stands in)."""
    findings = nag_findings(synth.report, f"{STACK}/Cluster/")
    assert findings == [f"AwsSolutions-S1 at {STACK}/Weights/Bucket/Resource"], "\n".join(findings)


# -- Bad input: one line naming the field ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bare() -> tuple[eks.Cluster, WeightsBucket]:
    stack = cdk.Stack(cdk.App(), "Bare")
    cluster = minimal_cluster(stack)
    return cluster, WeightsBucket(stack, "Weights", WeightsBucketProps(cluster=cluster))


PREFIX_RULE = "must be a key prefix without a leading '/' or '*', ending in '/' (so it cannot match a sibling prefix)"


@pytest.mark.parametrize("grant", ["reader", "stager"])
@pytest.mark.parametrize("prefix", ["models/llama", "/models/llama/", "models/*/", ""])
def test_a_prefix_that_could_match_more_is_refused(
    bare: tuple[eks.Cluster, WeightsBucket], grant: str, prefix: str
) -> None:
    _, weights = bare
    add = weights.add_reader if grant == "reader" else weights.add_stager
    with pytest.raises(ConfigError) as err:
        add("inference", "vllm", prefix)
    assert (
        str(err.value)
        == f"Bare/Weights: weights_bucket.{grant}.prefix: {prefix!r} is not allowed; {PREFIX_RULE} [LLMEKS-E305]"
    )


@pytest.mark.parametrize("grant", ["reader", "stager"])
def test_a_namespace_that_is_no_dns_label_is_refused(bare: tuple[eks.Cluster, WeightsBucket], grant: str) -> None:
    _, weights = bare
    add = weights.add_reader if grant == "reader" else weights.add_stager
    with pytest.raises(ConfigError) as err:
        add("Inference", "vllm", "models/x/")
    assert str(err.value) == (
        f"Bare/Weights: weights_bucket.{grant}.namespace: 'Inference' is not allowed; must be a DNS label "
        "(lowercase letters, digits and '-', at most 63 characters) [LLMEKS-E300]"
    )


def test_a_second_prefix_for_one_reader_is_refused(bare: tuple[eks.Cluster, WeightsBucket]) -> None:
    _, weights = bare
    weights.add_reader("inference", "two-models", "models/a/")
    with pytest.raises(ConfigError) as err:
        weights.add_reader("inference", "two-models", "models/b/")
    assert str(err.value) == (
        "Bare/Weights: weights_bucket.reader.prefix: 'models/b/' is not allowed; inference/two-models already reads "
        "'models/a/' (one prefix per reader: grant a common parent prefix instead) [LLMEKS-E305]"
    )


def test_one_stager_may_stage_several_prefixes(bare: tuple[eks.Cluster, WeightsBucket]) -> None:
    _, weights = bare
    first = weights.add_stager("inference", "stage-two", "models/a/")
    assert weights.add_stager("inference", "stage-two", "models/b/") is first
    policy = cast(iam.Policy, first.role.node.find_child("DefaultPolicy"))
    sids = [s["Sid"] for s in first.role.stack.resolve(policy.document)["Statement"]]
    assert len(sids) == len(set(sids)) == 12  # each prefix's objects and its markers
    with pytest.raises(ConfigError) as err:
        weights.add_stager("inference", "stage-two", "models/a-/")  # the same letters and digits as models/a/
    assert str(err.value) == (
        "Bare/Weights: weights_bucket.stager.prefix: 'models/a-/' is not allowed; its statement ids would repeat "
        "those of 'models/a/' (IAM wants them unique in a policy) [LLMEKS-E305]"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"removal_policy": cdk.RemovalPolicy.SNAPSHOT},
            "weights_bucket.removal_policy: RemovalPolicy.SNAPSHOT is not allowed; must be RemovalPolicy.RETAIN, "
            "RETAIN_ON_UPDATE_OR_DELETE or DESTROY (S3 has no snapshots) [LLMEKS-E305]",
        ),
        (
            {"abort_incomplete_upload_days": 0},
            "weights_bucket.abort_incomplete_upload_days: 0 is not allowed; must be a whole number of days from 1 "
            "to 365 [LLMEKS-E305]",
        ),
        (
            {"key_alias": "alias/aws/weights"},
            "weights_bucket.key_alias: 'alias/aws/weights' is not allowed; must be 'alias/' and 1-250 of letters, "
            "digits, '/', '_', '-' (not 'alias/aws/', which AWS reserves) [LLMEKS-E305]",
        ),
    ],
)
def test_bad_options(bare: tuple[eks.Cluster, WeightsBucket], options: dict[str, Any], message: str) -> None:
    cluster, _ = bare
    with pytest.raises(ConfigError) as err:
        WeightsBucketOptions(**options).validate()
    assert str(err.value) == message
    with pytest.raises(ConfigError) as err:
        WeightsBucket(cluster.stack, "BadWeights", WeightsBucketProps(cluster=cluster, **options))
    assert str(err.value) == f"Bare/BadWeights: {message}"


def test_model_weights_access_takes_tokens_but_still_checks_literals(
    bare: tuple[eks.Cluster, WeightsBucket],
) -> None:
    _, weights = bare
    ModelWeightsAccessOptions(
        bucket_name=weights.bucket_name, prefix="models/x/", service_account="vllm", kms_key_arn=weights.key.key_arn
    ).validate()
    with raises_code(E305, match=r"^model_weights\.bucket_name: 'My_Bucket' is not allowed"):
        ModelWeightsAccessOptions(bucket_name="My_Bucket", prefix="models/x/", service_account="vllm").validate()


def _statements(stack: cdk.Stack, identity: PodIdentityRole) -> list[dict[str, Any]]:
    policy = identity.role.node.find_child("DefaultPolicy").node.default_child
    return cast(list[dict[str, Any]], stack.resolve(cast(iam.CfnPolicy, policy).policy_document)["Statement"])


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


EXISTING_KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.mark.parametrize("key_arn", [None, EXISTING_KEY])
def test_an_existing_bucket_gets_the_same_grants_and_nothing_is_created(key_arn: str | None) -> None:
    """`existing_bucket_name`: no bucket and no key in the template; the reader and stager grants name that bucket,
    and decrypt only with its own key, or (SSE-S3) with none."""
    app = cdk.App()
    stack = cdk.Stack(app, "Existing")
    props = WeightsBucketProps(
        cluster=minimal_cluster(stack), existing_bucket_name="acme-llm-weights", existing_kms_key_arn=key_arn
    )
    weights = WeightsBucket(stack, "Weights", props)
    reader = weights.add_reader(*READER, READ_PREFIX)
    stager = weights.add_stager(*STAGER, STAGE_PREFIX)
    template = app.synth().get_stack_by_name("Existing").template
    types = {r["Type"] for r in template["Resources"].values()}
    assert not types & {"AWS::S3::Bucket", "AWS::KMS::Key"}
    for identity in (reader, stager):
        statements = _statements(stack, identity)
        kms = [s for s in statements if any(a.startswith("kms:") for a in _as_list(s["Action"]))]
        assert {s["Resource"] for s in kms} == (set() if key_arn is None else {key_arn})
        s3_resources = json.dumps([s["Resource"] for s in statements if s not in kms])
        assert "acme-llm-weights" in s3_resources


def test_an_existing_key_without_an_existing_bucket_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        WeightsBucketOptions(existing_kms_key_arn=EXISTING_KEY).validate()
    assert str(info.value) == (
        "weights_bucket.existing_kms_key_arn: only allowed with existing_bucket_name (a created bucket has its own key)"
        " [LLMEKS-E305]"
    )


def test_a_marker_reader_reads_one_staging_keys_marker_only() -> None:
    """The pod waiting for staging key K reads `staging-markers/<prefix>K*` (its marker and in-progress record):
    never another key's, never the weights themselves through this grant."""
    stack = cdk.Stack(cdk.App(), "Markers")
    weights = WeightsBucket(stack, "Weights", WeightsBucketProps(cluster=minimal_cluster(stack)))
    reader = weights.add_marker_reader("inference", "vllm-x", "models/x/", "0123abcd")
    statements = _statements(stack, reader)
    gets = [s for s in statements if s["Action"] == "s3:GetObject"]
    assert len(gets) == 1 and json.dumps(gets[0]["Resource"]).endswith('"/staging-markers/models/x/0123abcd*"]]}')
    lists = [s for s in statements if s["Action"] == "s3:ListBucket"]
    assert [s["Condition"] for s in lists] == [
        {"StringLike": {"s3:prefix": ["staging-markers/models/x/0123abcd", "staging-markers/models/x/0123abcd*"]}}
    ]
    with pytest.raises(ConfigError) as err:
        weights.add_marker_reader("inference", "vllm-x", "models/x/", "*")
    assert str(err.value) == (
        "Markers/Weights: weights_bucket.marker_reader.key: '*' is not allowed; must be a staging key [LLMEKS-E305]"
    )
