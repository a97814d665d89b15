#!/usr/bin/env bash
# The promotion pipeline's verify step (infra/pipeline.py runs it after a stage deploys): hand this checkout and the
# synth step's wheelhouse to the stage's VerifyRunner project, start `llm-eks verify` there, wait, print its log, keep
# its journal in ./verify-output (the step's artifact), and end with its outcome.
#
# Input (the stage stack's outputs, through env_from_cfn_outputs): VERIFY_PROJECT, VERIFY_SOURCE_BUCKET,
# VERIFY_LAUNCHER_ROLE_ARN, VERIFY_LOG_GROUP; LLM_EKS_ENV names the environment and VERIFY_EXTERNAL_ID is the
# ExternalId the launcher role requires. VERIFY_POLL_SECONDS (default 15) and VERIFY_MAX_POLLS (default 200: 50
# minutes, the runner's 45 and its queue) bound the wait.
set -euo pipefail

for name in VERIFY_PROJECT VERIFY_SOURCE_BUCKET VERIFY_LAUNCHER_ROLE_ARN VERIFY_LOG_GROUP LLM_EKS_ENV VERIFY_EXTERNAL_ID; do
  if [ -z "${!name:-}" ]; then
    echo "llm-eks: error: $name is not set (the verify step sets it from the stage's stack outputs and its own environment)" >&2
    exit 2
  fi
done
if [ ! -f wheelhouse/requirements.txt ]; then
  echo "llm-eks: error: no wheelhouse/requirements.txt in the checkout (the synth step's wheelhouse output)" >&2
  exit 2
fi
poll_seconds="${VERIFY_POLL_SECONDS:-15}"
max_polls="${VERIFY_MAX_POLLS:-200}"
output=verify-output
mkdir -p "$output"

# The launcher role lives in the environment's account and trusts this step's role with the ExternalId; its session
# starts the build there.
read -r key secret token < <(aws sts assume-role \
  --role-arn "$VERIFY_LAUNCHER_ROLE_ARN" \
  --role-session-name "llm-eks-verify-${LLM_EKS_ENV}" \
  --external-id "$VERIFY_EXTERNAL_ID" \
  --query 'Credentials.[AccessKeyId,SecretAccessKey,SessionToken]' --output text)
export AWS_ACCESS_KEY_ID="$key" AWS_SECRET_ACCESS_KEY="$secret" AWS_SESSION_TOKEN="$token"

archive="$(mktemp -d)/source.zip"
# The checkout and its wheelhouse, without what the runner never reads (python3: CodeBuild's images have it, not
# always zip).
python3 - "$archive" <<'PY'
import os, sys, zipfile
skip = {".git", "cdk.out", "node_modules", ".venv", "verify-output"}
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as archive:
    for root, dirs, files in os.walk(".", followlinks=True):  # the wheelhouse is a link to its artifact
        dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            archive.write(os.path.join(root, name))
PY
# The build runs the object version uploaded here, not whatever another run uploads meanwhile.
version="$(aws s3api put-object --bucket "$VERIFY_SOURCE_BUCKET" --key source.zip --body "$archive" \
  --query VersionId --output text)"
build="$(aws codebuild start-build --project-name "$VERIFY_PROJECT" --source-version "$version" \
  --query build.id --output text)"
echo "llm-eks: verifying ${LLM_EKS_ENV} in CodeBuild build ${build}"

status=IN_PROGRESS
for _ in $(seq "$max_polls"); do
  status="$(aws codebuild batch-get-builds --ids "$build" --query 'builds[0].buildStatus' --output text)"
  [ "$status" = IN_PROGRESS ] || break
  sleep "$poll_seconds"
done

stream="$(aws codebuild batch-get-builds --ids "$build" --query 'builds[0].logs.streamName' --output text)"
if [ -n "$stream" ] && [ "$stream" != None ]; then
  aws logs get-log-events --log-group-name "$VERIFY_LOG_GROUP" --log-stream-name "$stream" --start-from-head \
    --query 'events[].message' --output json | python3 -c 'import json, sys; sys.stdout.write("".join(json.load(sys.stdin)))'
fi

# The stage's artifact: the build and its outcome, and the journal and calibration record the runner left.
printf '{"environment": "%s", "build": "%s", "status": "%s"}\n' "$LLM_EKS_ENV" "$build" "$status" > "$output/build.json"
for file in verify-journal.jsonl verify-record.json; do
  aws s3 cp --quiet "s3://${VERIFY_SOURCE_BUCKET}/journals/${build}/${file}" "$output/${file}" \
    || echo "llm-eks: no ${file} from build ${build} (verify did not get that far)" >&2
done

case "$status" in
  SUCCEEDED)
    echo "llm-eks: ${LLM_EKS_ENV} matches its plan (build ${build})"
    ;;
  IN_PROGRESS)
    echo "llm-eks: error: verify of ${LLM_EKS_ENV} still running after $((poll_seconds * max_polls)) s (build ${build}); stopping it" >&2
    aws codebuild stop-build --id "$build" >/dev/null
    exit 1
    ;;
  *)
    echo "llm-eks: error: verify of ${LLM_EKS_ENV} ended ${status} (build ${build}): the environment breaches or drifts from its plan, or verify could not run; see the log above" >&2
    exit 1
    ;;
esac
