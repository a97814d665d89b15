"""Which API key secrets an environment's stack generates (`GeneratedApiKey`, a value Secrets Manager makes): each
workload's own key, wherever something checks it (its vLLM server, or the gateway for the workload's own tenant when
no tenants are declared), and each declared tenant's key that names no secret of its own. No two workloads or tenants
share one: a next version checks its current version's key (both serve the same callers)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from llm_eks.config import EnvironmentConfig
from llm_eks.config.tenant_checks import tenant_key_secret
from llm_eks.infra.workloads.props import api_key_secret, generated_api_key_secret, workload_key_secret
from llm_eks.infra.workloads.types import Workload


@dataclass(frozen=True)
class GeneratedKey:
    secret_name: str
    # The construct's id in the stack (the shorthand's is `ApiKey`, as before workloads had keys of their own).
    construct_id: str
    description: str


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name) if part)


def generated_keys(config: EnvironmentConfig, workloads: Sequence[Workload]) -> list[GeneratedKey]:
    """Every generated key secret of the environment, once each, in a stable order."""
    keys: dict[str, GeneratedKey] = {}
    gateway = workloads[0].gateway if workloads else None
    own_tenants = gateway is not None and config.gateway is not None and not config.gateway.tenants
    for s in config.served:
        generated = generated_api_key_secret(config, s)
        owner = s.canary_of or s.key
        used = api_key_secret(config, s) == generated or (
            own_tenants and s.canary_of is None and workload_key_secret(config, s) == generated
        )
        if used and generated not in keys:
            construct_id = "ApiKey" if owner is None else f"ApiKey{_camel(owner)}"
            what = "the API key" if owner is None else f"workload {owner}'s API key"
            keys[generated] = GeneratedKey(generated, construct_id, f"Secrets Manager secret holding {what}")
    if config.gateway is not None:
        for name, tenant in config.gateway.tenants.items():
            if tenant.credential.api_key is not None and tenant.credential.api_key.secret is None:
                secret = tenant_key_secret(config, name)
                keys[secret] = GeneratedKey(
                    secret, f"TenantKey{_camel(name)}", f"Secrets Manager secret holding tenant {name}'s API key"
                )
    return list(keys.values())
