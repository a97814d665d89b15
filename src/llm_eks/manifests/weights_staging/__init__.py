"""Weights staging: a one-shot Job copies one model's checkpoint from the Hugging Face Hub to
s3://<weights bucket>/<prefix>, and the serving pods wait for it before vLLM streams the weights with the Run:ai
streamer (`--load-format runai_streamer`).

`props` holds WeightsStagingProps, their checks and the staging key; `objects` the Kubernetes objects and the
serving pod's init container; `stage` the Job's program and `wait` the init container's, both plain scripts the
vLLM image runs (stdlib, huggingface_hub, boto3) and the tests import.

The bucket's name is known only at deploy time: the stack creates ConfigMap `llm-eks-weights` (key `bucket`) in each
workload namespace, and every pod that needs it reads it into LLM_EKS_WEIGHTS_BUCKET (bucket_env()); the kubelet
expands `$(LLM_EKS_WEIGHTS_BUCKET)` in command and args (s3_model_uri() for vLLM's model argument).

The staging key (staging_key) is a hash of the repo, revision, prefix, file patterns and image. The Job is named
`<name>-<key>`: a Job's pod template is immutable, so a changed model gets a new Job rather than a failed apply, and
it re-stages. The Job's program is idempotent and resumable (stage.py): files already in S3 with the same size and
hash are left alone, so a rerun after a failure, a lost Spot node or a TTL-deleted Job re-applied costs one HEAD per
file. It ends by writing its key's marker `staging-markers/<prefix><key>.json`, once and never overwritten; the
serving pods' init container (wait_for_weights_init_container) exits once their key's marker is there, so the first
replica of a new model starts after staging and never streams a half-written prefix, and a new key (a vLLM bump, a
locked image digest) stages beside the running one instead of holding its pods back. Without a marker and without
a staging alive (its in-progress record) the init container gives up after 10 minutes with one line. The Job never
deletes an object: a revision that drops files of an earlier staging to the same prefix, or replaces files another
key's marker lists, fails before changing anything (one prefix per revision, as in the example prefix, never meets
that).

What the AWS side provides (WeightsBucket.add_stager and add_reader grant exactly this):
- the ConfigMap above, in the workload namespace;
- a Pod Identity association for the Job's own ServiceAccount `<name>` (the serving role stays read-only), add-only
  on the prefix: s3:GetObject, s3:PutObject, s3:AbortMultipartUpload on `<bucket>/<prefix>*`, s3:ListBucket for
  keys under the prefix (so a missing object reads as 404, not 403), and kms:GenerateDataKey and kms:Decrypt through
  S3 for a customer managed key; with hf_token_secret, secretsmanager:GetSecretValue on that secret, which the
  Secrets Store CSI driver reads with the pod's identity as it does for the serving pods;
- for the serving ServiceAccount: s3:GetObject on `<prefix>*` and s3:ListBucket on the prefix, which the streamer
  needs anyway, and the same on its own key's markers `staging-markers/<prefix><key>*`, which the init container
  reads (the listing tells "no marker yet" from "access denied"); the staging Job also writes under
  `staging-markers/<prefix>`;
- an AbortIncompleteMultipartUpload lifecycle rule on the bucket: a pod killed mid-upload leaves parts behind.
Egress from the workload namespace stays open (network_policies), which the Job needs for the Hub and S3.

The same bucket keeps each workload's torch.compile cache, per GPU family and cache key (a hash of the image and
vLLM's arguments), under `compile-cache/<workload>/<family>/<key>/` (compile_cache_prefix, compile_cache_key). It
has one writer: a Job of its own (the vLLM chart's compile-cache Job, with its own ServiceAccount, no Hub token and
no client traffic) that compiles, then writes the files, a manifest of their sha256 digests and a KMS signature of
the manifest, each once (If-None-Match; the bucket policy refuses any other write under compile-cache/). Serving pods
only read: compile_cache_restore_container (an init container after wait-for-weights) has KMS verify the signature
and restores exactly the files the manifest lists, each checked, and always exits 0. `compile_cache` is the program
both run with `python3 -c`. CUDA graphs are not in the cache: vLLM captures them at every start.
"""

from llm_eks.manifests.weights_staging.objects import (
    COMPILE_CACHE_SCRIPT_ENV,
    RESTORE_COMPILE_CACHE_CONTAINER,
    STAGING_APP,
    STAGING_KEY_LABEL,
    WAIT_CONTAINER,
    bucket_config_map,
    bucket_env,
    cache_signing_key_env,
    compile_cache_dir,
    compile_cache_publish_command,
    compile_cache_restore_container,
    compile_cache_script,
    fetch_adapter_init_container,
    fetch_weights_init_container,
    s3_model_uri,
    script_config_map_name,
    stage_script,
    staging_objects,
    wait_for_weights_init_container,
    wait_script,
)
from llm_eks.manifests.weights_staging.props import (
    ADAPTER_ALLOW_PATTERNS,
    BUCKET_CONFIG_MAP,
    BUCKET_ENV,
    BUCKET_KEY,
    COMPILE_CACHE_ROOT,
    COMPILE_CACHE_SUBDIR,
    DEFAULT_ALLOW_PATTERNS,
    DEFAULT_IGNORE_PATTERNS,
    KEY_LENGTH,
    REMOTE_CODE_PATTERNS,
    SIGNING_KEY_ENV,
    SIGNING_KEY_KEY,
    WeightsStagingProps,
    compile_cache_key,
    compile_cache_prefix,
    staging_job_name,
    staging_key,
    validate_weights_staging_props,
)
from llm_eks.manifests.weights_staging.stage import MARKER, MARKERS, in_progress_key, marker_key

__all__ = [
    "ADAPTER_ALLOW_PATTERNS",
    "BUCKET_CONFIG_MAP",
    "BUCKET_ENV",
    "BUCKET_KEY",
    "COMPILE_CACHE_ROOT",
    "COMPILE_CACHE_SCRIPT_ENV",
    "COMPILE_CACHE_SUBDIR",
    "DEFAULT_ALLOW_PATTERNS",
    "DEFAULT_IGNORE_PATTERNS",
    "KEY_LENGTH",
    "MARKER",
    "MARKERS",
    "REMOTE_CODE_PATTERNS",
    "RESTORE_COMPILE_CACHE_CONTAINER",
    "SIGNING_KEY_ENV",
    "SIGNING_KEY_KEY",
    "STAGING_APP",
    "STAGING_KEY_LABEL",
    "WAIT_CONTAINER",
    "WeightsStagingProps",
    "bucket_config_map",
    "bucket_env",
    "cache_signing_key_env",
    "compile_cache_dir",
    "compile_cache_key",
    "compile_cache_prefix",
    "compile_cache_publish_command",
    "compile_cache_restore_container",
    "compile_cache_script",
    "fetch_adapter_init_container",
    "fetch_weights_init_container",
    "in_progress_key",
    "marker_key",
    "s3_model_uri",
    "script_config_map_name",
    "stage_script",
    "staging_job_name",
    "staging_key",
    "staging_objects",
    "validate_weights_staging_props",
    "wait_for_weights_init_container",
    "wait_script",
]
