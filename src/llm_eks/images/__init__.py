"""Image lock: every container image llm-eks runs, mapped to the digest it was resolved to.

- `reference`: parse image references the way Docker and containerd read them (Docker Hub's implied registry and
  `library/` prefix included).
- `lock`: the reviewed lock file (`images.lock.json` next to cdk.json) and `pin`, which turns `repo:tag` into
  `repo:tag@sha256:...` (the tag stays for the humans reading the YAML; the runtime pulls by digest).
- `charts`: the images of the Helm releases llm-eks installs, at their pinned chart versions, and the values that
  put a locked digest into each chart.
- `registry`: resolve a tag to its digest through the OCI Distribution API (anonymous bearer-token flow).

No aws_cdk, cdk8s or infra import here: constructs, the CDK app and the `llm-eks images lock` CLI all use it.
"""
