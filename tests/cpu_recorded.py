"""Recorded ``/proc/cpuinfo`` excerpts, each with its public source, fed to the real CPU probe in tests.

Only the two lines the probe reads are kept: the model line and the feature-flag line
(``flags`` on x86, ``Features`` on aarch64), verbatim as the sources print them.
Flag names are the Linux kernel's (x86: ``arch/x86/include/asm/cpufeatures.h``;
arm64: ``arch/arm64/kernel/cpuinfo.c``, ``hwcap_str``). These let every test of the
CPU policy run the same on any host: nothing here depends on the machine running the suite.
"""

from __future__ import annotations

from pathlib import Path

import attrs

#: AMD EPYC 7763 (Zen 3 "Milan"): AVX2, no AVX-512 of any kind, so no native bf16 (AMD EPYC 7003 series
#: product brief: AVX2; AVX-512 arrived with Zen 4). The model string is GitHub-hosted runners' (lscpu quoted
#: in vllm-project/vllm-ascend PR #96). No verbatim public flag line was at hand: this one is Milan's feature
#: set as a KVM guest, written with the kernel's flag names. What the test relies on - ``avx2`` present, no
#: ``avx512*``/``amx*`` flag - is the published spec. The CPU class of the machine the issue saw fail.
EPYC_7763_AVX2 = """\
model name\t: AMD EPYC 7763 64-Core Processor
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht \
syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl tsc_reliable nonstop_tsc cpuid extd_apicid \
aperfmperf pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm \
cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext invpcid_single vmmcall fsgsbase bmi1 avx2 \
smep bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves clzero xsaveerptr rdpru \
arat npt nrip_save umip vaes vpclmulqdq rdpid fsrm
"""

#: AMD Ryzen 9 7950X3D (Zen 4): AVX-512 with AVX512-BF16, no AMX, no AVX512-FP16. Flag line quoted in
#: gentoo/cpuid2cpuflags PR #25 (https://github.com/gentoo/cpuid2cpuflags/pull/25), the /proc/cpuinfo column.
ZEN4_7950X3D = """\
model name\t: AMD Ryzen 9 7950X3D 16-Core Processor
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht \
syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good amd_lbr_v2 nopl nonstop_tsc cpuid extd_apicid \
aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand \
lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext \
perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 hw_pstate ssbd mba perfmon_v2 ibrs ibpb stibp \
ibrs_enhanced vmmcall fsgsbase bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a avx512f avx512dq rdseed adx smap \
avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc \
cqm_mbm_total cqm_mbm_local user_shstk avx512_bf16 clzero irperf xsaveerptr rdpru wbnoinvd cppc arat npt lbrv \
svm_lock nrip_save tsc_scale vmcb_clean flushbyasid decodeassists pausefilter pfthreshold avic
"""

#: Intel Xeon Platinum 8470 (Sapphire Rapids): AMX-BF16, AVX512-BF16 and AVX512-FP16. Model line from
#: numpy/numpy PR #25372 (https://github.com/numpy/numpy/pull/25372, whose subject is this CPU's
#: ``avx512_fp16`` spelling); flag line as /proc/cpuinfo prints it on Sapphire Rapids, matching the excerpt
#: in pytorch/cpuinfo issue #312 (https://github.com/pytorch/cpuinfo/issues/312) and the AMX-BF16/AMX-TILE/
#: AMX-INT8/AVX512-FP16/AVX512-BF16 list GCC documents for ``-march=sapphirerapids``.
SPR_8470 = """\
model name\t: Intel(R) Xeon(R) Platinum 8470
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse \
sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology \
nonstop_tsc cpuid aperfmperf tsc_known_freq pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 \
xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm \
3dnowprefetch cpuid_fault epb cat_l3 cat_l2 cdp_l3 invpcid_single intel_ppin cdp_l2 ssbd mba ibrs ibpb stibp \
ibrs_enhanced tpr_shadow vnmi flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid cqm \
rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb intel_pt avx512cd sha_ni avx512bw avx512vl \
xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local split_lock_detect avx_vnni \
avx512_bf16 wbnoinvd dtherm ida arat pln pts hfi avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes \
vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq la57 rdpid bus_lock_detect cldemote movdiri movdir64b \
enqcmd fsrm md_clear serialize tsxldtrk pconfig arch_lbr ibt amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d \
arch_capabilities
"""

#: AWS Graviton3 (Neoverse V1, CPU part 0xd40) as an older kernel reports it: the core implements BF16
#: (Neoverse V1 TRM: "The BFloat16 extension introduced in the Armv8.6-A extension"), but this kernel's
#: Features line stops at ``ssbs`` and lists no ``bf16``. The probe trusts the kernel, so this is fp32: the
#: conservative answer. Quoted from archspec/archspec-json PR #51 (https://github.com/archspec/archspec-json/pull/51),
#: ``head -9 /proc/cpuinfo`` on a c7g instance. (aarch64 /proc/cpuinfo has no model name line.)
GRAVITON3_V1_OLD_KERNEL = """\
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop \
sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs
CPU part\t: 0xd40
"""

#: NVIDIA Grace (Neoverse V2, GH200): ``bf16`` (FEAT_BF16) listed. Flag line from ``lscpu`` on a
#: Grace-Hopper system quoted in archspec/archspec issue #159 (https://github.com/archspec/archspec/issues/159);
#: lscpu's Flags are /proc/cpuinfo's Features.
GRACE_V2 = """\
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop \
sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb dcpodp sve2 sveaes svepmull svebitperm \
svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 dgh
CPU part\t: 0xd4f
"""

#: Apple M1 under Asahi Linux (implementer 0x61 = Apple): no ``bf16`` (FEAT_BF16 arrived with M2), so fp32 on
#: the CPU (the MPS plugin decides the GPU). Quoted in fastfetch-cli/fastfetch issue #1529
#: (https://github.com/fastfetch-cli/fastfetch/issues/1529), "Asahi Linux on Mac Mini M1"; pytorch/cpuinfo
#: issue #380 reports "ARM v8.2 BF16: no" for the same chip.
APPLE_M1_ASAHI = """\
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop \
sha3 asimddp sha512 asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp flagm2 frint
CPU implementer\t: 0x61
CPU part\t: 0x022
"""

#: Apple silicon under macOS: there is no /proc/cpuinfo (macOS exposes features through ``sysctl hw.optional``),
#: so the probe sees no flags and the CPU policy stays fp32; MPS is the device there.
APPLE_MACOS = None


@attrs.frozen
class RecordedCpu:
    """One recorded machine: what its /proc/cpuinfo says, and what the CPU policy must decide from it."""

    name: str
    cpuinfo: str | None  # None: no /proc/cpuinfo (macOS)
    machine: str  # platform.machine() on that host
    bf16: bool  # what the CPU policy must allow (kernel-listed avx512_bf16/amx_bf16/bf16)
    fp16: bool  # ditto for fp16 (x86 avx512_fp16/amx_fp16; aarch64 fphp is not used for autocast)

    def write(self, directory: Path) -> Path:
        """This record as a cpuinfo file for the real probe (a missing file where the OS has none)."""
        path = directory / f"cpuinfo-{self.name}"
        if self.cpuinfo is not None:
            path.write_text(self.cpuinfo)
        return path


RECORDED = (
    RecordedCpu("epyc-7763-avx2", EPYC_7763_AVX2, "x86_64", bf16=False, fp16=False),
    RecordedCpu("zen4-7950x3d", ZEN4_7950X3D, "x86_64", bf16=True, fp16=False),
    RecordedCpu("sapphire-rapids-8470", SPR_8470, "x86_64", bf16=True, fp16=True),
    RecordedCpu("graviton3-v1-old-kernel", GRAVITON3_V1_OLD_KERNEL, "aarch64", bf16=False, fp16=False),
    RecordedCpu("grace-v2", GRACE_V2, "aarch64", bf16=True, fp16=False),
    RecordedCpu("apple-m1-asahi", APPLE_M1_ASAHI, "aarch64", bf16=False, fp16=False),
    RecordedCpu("apple-macos", APPLE_MACOS, "arm64", bf16=False, fp16=False),
)
BY_NAME = {r.name: r for r in RECORDED}
