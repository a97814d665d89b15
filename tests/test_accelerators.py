"""The accelerator catalog: every row is complete and self-consistent, lookups fail with a useful one-line error."""

from __future__ import annotations

import dataclasses
import re

import pytest

from llm_eks.catalog.accelerators import (
    CATALOG,
    FAMILIES,
    INSTANCE_TYPES,
    PRICES_READ,
    family,
    instance_type,
)
from llm_eks.errors import ConfigError

# ray/util/accelerators/accelerators.py (ray-project/ray): the accelerator_type constants a Ray Serve LLM config
# may name.
RAY_CONSTANTS = {
    "V100", "P100", "T4", "P4", "K80", "A10G", "L4", "L40S", "A100", "H100", "H200", "H20", "B200",
    "aws-neuron-core", "A100-40G", "A100-80G",
}  # fmt: skip


def test_catalog_covers_the_llm_inference_families() -> None:
    expected = {"g5", "g6", "gr6", "g6e", "g7", "g7e", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300"}
    assert expected | {"inf2", "trn1", "trn1n", "trn2"} == set(FAMILIES)
    assert len(INSTANCE_TYPES) == len(CATALOG), "instance types are unique"


@pytest.mark.parametrize("row", CATALOG, ids=lambda r: r.instance_type)
def test_row_is_complete_and_consistent(row) -> None:
    assert row.instance_type.split(".")[0] == row.family
    assert row.accelerator_vendor in ("nvidia", "neuron")
    assert row.accelerators >= 1 and row.vcpus >= 4 and row.memory_gib >= 16
    assert row.accelerator_memory_mib >= 22_000 and row.memory_bandwidth_gbps >= 300
    assert row.network_gbps > 0 and row.ebs_bandwidth_mbps > 0
    assert (row.interconnect == "none") == (row.accelerators == 1)
    assert row.on_demand_usd_per_hour is None or 0.5 < row.on_demand_usd_per_hour < 200
    if row.on_demand_usd_per_hour is None:
        assert row.note, "a row without a price says why"
    assert row.ray_accelerator_type is None or row.ray_accelerator_type in RAY_CONSTANTS
    # Allocatable never exceeds capacity.
    assert row.allocatable_cpu < row.vcpus * 1000
    assert row.allocatable_memory < row.memory_gib * 1024


def test_extended_resource_follows_the_vendor() -> None:
    assert instance_type("g6e.xlarge").extended_resource == "nvidia.com/gpu"
    assert instance_type("inf2.48xlarge").extended_resource == "aws.amazon.com/neuron"
    assert instance_type("inf2.48xlarge").cores_per_accelerator == 2


def test_figures_as_aws_states_them() -> None:
    g6e = instance_type("g6e.xlarge")
    # EC2 reports 45,776 MiB for the "48 GB" L40S: 45,776 / 1024 = 44.70 GiB.
    assert g6e.accelerator_memory_gib == pytest.approx(44.70, abs=0.01)
    assert (g6e.accelerator_name, g6e.accelerators, g6e.vcpus, g6e.memory_gib) == ("L40S", 1, 4, 32)
    assert g6e.on_demand_usd_per_hour == 1.861
    p5 = instance_type("p5.48xlarge")
    assert (p5.accelerators, p5.accelerator_memory_gib, p5.interconnect, p5.efa) == (8, 80, "NVSwitch 900 GB/s", True)
    assert instance_type("p5en.48xlarge").accelerator_memory_mib == 144_384  # H200 "141 GB"
    assert instance_type("p4d.24xlarge").ray_accelerator_type == "A100-40G"
    assert instance_type("p4de.24xlarge").ray_accelerator_type == "A100-80G"
    assert instance_type("g5.xlarge").karpenter_name == "a10g"


def test_compute_capability_per_gpu() -> None:
    # NVIDIA's CUDA GPU Compute Capability table (A10G = A10); None for Inferentia2.
    by_gpu = {(row.accelerator_name, row.compute_capability) for row in CATALOG}
    assert by_gpu == {
        ("A10G", (8, 6)), ("L4", (8, 9)), ("L40S", (8, 9)), ("RTX-PRO-4500", (12, 0)), ("RTX-PRO-6000", (12, 0)),
        ("A100-40G", (8, 0)), ("A100-80G", (8, 0)), ("H100", (9, 0)), ("H200", (9, 0)), ("B200", (10, 0)),
        ("B300", (10, 3)), ("Inferentia2", None), ("Trainium", None), ("Trainium2", None),
    }  # fmt: skip


def test_p5en_and_p6_b200_as_karpenter_and_the_price_list_state_them() -> None:
    # Karpenter instance-types reference v1.14.0 and the AWS Price List snapshot of 2026-07-20 (us-east-1).
    p5en, b200 = instance_type("p5en.48xlarge"), instance_type("p6-b200.48xlarge")
    shape = ("accelerators", "vcpus", "memory_gib", "local_nvme_gb", "efa", "network_gbps", "ebs_bandwidth_mbps")
    assert [getattr(p5en, f) for f in shape] == [8, 192, 2048, 30400, True, 3200, 100000]
    assert [getattr(b200, f) for f in shape] == [8, 192, 2048, 30400, True, 3200, 100000]
    assert (p5en.accelerator_name, p5en.accelerator_memory_mib, p5en.on_demand_usd_per_hour) == ("H200", 144384, 63.296)
    assert (b200.accelerator_name, b200.accelerator_memory_mib, b200.on_demand_usd_per_hour) == (
        "B200",
        183359,
        113.9328,
    )
    assert (p5en.allocatable_cpu, p5en.allocatable_memory) == (b200.allocatable_cpu, b200.allocatable_memory)
    assert (b200.allocatable_cpu, b200.allocatable_memory) == (191450, 1937332)


def test_prices_carry_their_date() -> None:
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", PRICES_READ)
    assert instance_type("p5e.48xlarge").on_demand_usd_per_hour is None


def test_allocatable_cpu_formula_reproduces_karpenter() -> None:
    # The EKS AMI reserves 6 % of core 1, 1 % of core 2, 0.5 % of cores 3-4, 0.25 % of the rest:
    # 4 vCPU -> 60 + 10 + 10 = 80m reserved -> 3920m; 192 vCPU -> 80 + 188 x 2.5 = 550m -> 191450m.
    for row in CATALOG:
        derived = dataclasses.replace(row, allocatable_cpu_millicores=None)
        assert derived.allocatable_cpu == row.allocatable_cpu_millicores, row.instance_type


def test_allocatable_memory_formula_for_rows_without_figures() -> None:
    row = dataclasses.replace(instance_type("g5.xlarge"), allocatable_memory_mib=None)
    # 16 GiB = 16384 MiB x (1 - 0.075) = 15155.2; less 255 + 11 x 110 pods = 1465 and the 100 MiB eviction threshold.
    assert row.allocatable_memory == int(16384 * 0.925 - 1465 - 100) == 13590


def test_family_lookup_lists_sizes_smallest_first() -> None:
    assert [r.instance_type for r in family("p5")] == ["p5.4xlarge", "p5.48xlarge"]
    assert family("g6e")[0].instance_type == "g6e.xlarge"


def test_unknown_instance_type_suggests_the_closest() -> None:
    with pytest.raises(ConfigError) as err:
        instance_type("g6e.xlarg")
    message = str(err.value)
    assert message.startswith("workload.accelerator: 'g6e.xlarg' is not allowed; did you mean 'g6e.xlarge'? allowed: ")
    assert "g5.xlarge, g5.2xlarge" in message and "\n" not in message


def test_unknown_family_lists_the_families() -> None:
    with pytest.raises(ConfigError) as err:
        family("p5x")
    assert str(err.value) == (
        "workload.accelerator_family: 'p5x' is not allowed; did you mean 'p5'? "
        "allowed: g5, g6, gr6, g6e, g7, g7e, p4d, p4de, p5, p5e, p5en, p6-b200, p6-b300, inf2, trn1, trn1n, trn2"
        " [LLMEKS-E201]"
    )


def test_neuron_rows_as_karpenter_the_price_list_and_the_neuron_sdk_state_them() -> None:
    # Karpenter reference v1.14 (instance-cpu, instance-memory, NVMe, network, EBS, neuron, efa; allocatable cpu and
    # memory) and the AWS Price List of 2026-07-20; cores and HBM from the Neuron SDK's hardware pages.
    shape = ("accelerators", "vcpus", "memory_gib", "local_nvme_gb", "efa_interfaces", "network_gbps",
             "ebs_bandwidth_mbps", "allocatable_cpu", "allocatable_memory", "on_demand_usd_per_hour")  # fmt: skip
    rows = {
        "trn1.2xlarge": [1, 8, 32, 474, 0, 3.125, 20000, 7910, 29317, 1.34375],
        "trn1.32xlarge": [16, 128, 512, 7600, 8, 800, 80000, 127610, 481894, 21.5],
        "trn1n.32xlarge": [16, 128, 512, 7600, 16, 1600, 80000, 127610, 481894, 24.78],
        "trn2.48xlarge": [16, 192, 2048, 7600, 16, 3200, 80000, 191450, 1938410, None],
    }
    for name, expected in rows.items():
        assert [getattr(instance_type(name), f) for f in shape] == expected, name
    inf2, trn1, trn2 = instance_type("inf2.48xlarge"), instance_type("trn1.32xlarge"), instance_type("trn2.48xlarge")
    # NeuronCore-v2: 2 per chip and 16 GiB each; Trainium2 at LNC=2: 4 logical NeuronCore-v3 of 24 GiB per chip.
    assert (inf2.neuron_core, inf2.cores_per_accelerator, inf2.logical_core_config, inf2.cores) == (
        "NeuronCore-v2",
        2,
        1,
        24,
    )
    assert (trn1.neuron_core, trn1.cores, trn1.memory_per_core_bytes) == ("NeuronCore-v2", 32, 16 * 1024**3)
    assert (trn2.neuron_core, trn2.cores_per_accelerator, trn2.logical_core_config) == ("NeuronCore-v3", 4, 2)
    assert (trn2.cores, trn2.memory_per_core_bytes, trn2.memory_bandwidth_gbps) == (64, 24 * 1024**3, 2900)
    assert trn2.karpenter_name == "trainium2" and trn1.karpenter_name == "trainium"
    assert "no on-demand price for trn2.48xlarge in us-east-1" in trn2.note
    assert all(row.neuron_core is None for row in CATALOG if row.accelerator_vendor == "nvidia")
