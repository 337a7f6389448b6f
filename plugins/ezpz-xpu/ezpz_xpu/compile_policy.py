"""Pure Intel GPU torch.compile policy: recorded facts in, explained decision out. No torch, no triton import.

Recorded facts (public sources):
- Linux: torch 2.4 brought Intel GPU support upstream with "an enabled Intel
  GPU back end" for graph mode (torch.compile) that integrates Triton (Intel,
  "PyTorch 2.4 Debuts with Initial Support of Intel GPUs",
  https://intel.com/content/www/us/en/developer/articles/technical/pytorch-2-4-supports-gpus-accelerate-ai-workloads.html);
  torch 2.5 extended it to client GPUs (PyTorch 2.5 release blog,
  https://pytorch.org/blog/pytorch2-5/, "Enhanced Intel GPU support").
- Windows: torch.compile for XPU needs torch 2.7 or later ("How to use
  torch.compile on Windows CPU/XPU", https://docs.pytorch.org/tutorials/prototype/inductor_windows.html:
  "Install PyTorch 2.7 or later ... for XPU usage"; Intel, "Accelerate PyTorch
  2.7 on Intel GPUs": graph mode and eager mode on Windows and Linux).
- XPU wheels ship Triton as ``pytorch-triton-xpu`` (import name ``triton``);
  without it torch raises ``TritonMissing`` (``torch/_inductor/exc.py``), whose
  message is used below.
- DeepSpeed's Intel GPU accelerator is ``xpu`` (``deepspeed/accelerator/real_accelerator.py``).
"""

from __future__ import annotations

from ezpz.compiling import CompileOption
from ezpz.facts import TorchBuild

__all__ = ["DS_ACCELERATOR", "INDUCTOR_FROM", "compile_options"]

#: First torch release whose Inductor supports XPU, per operating system (``sys.platform``).
INDUCTOR_FROM: dict[str, tuple[int, int]] = {"linux": (2, 4), "win32": (2, 7)}
DS_ACCELERATOR = "xpu"
TRITON_MISSING = ("Cannot find a working triton installation. Either the package is not installed or it is too old. "
                  "More information on installing Triton can be found at: https://github.com/triton-lang/triton")


def compile_options(build: TorchBuild, label: str, *, platform: str, triton_found: bool) -> list[CompileOption]:
    """Inductor where this torch version supports XPU on this OS and Triton is installed, else aot_eager."""
    since = INDUCTOR_FROM.get(platform)
    if since is None:
        inductor = CompileOption(backend="inductor", available=False,
                                 reason=f"Inductor for XPU is documented for Linux and Windows only (this is {platform})")
    elif build.release < since:
        os_name = "Windows" if platform == "win32" else "Linux"
        inductor = CompileOption(
            backend="inductor", available=False,
            reason=f"Inductor supports XPU on {os_name} from torch {since[0]}.{since[1]} (have {build.version})")
    elif not triton_found:
        inductor = CompileOption(backend="inductor", available=False,
                                 reason=f"torch says: {TRITON_MISSING} (XPU wheels ship it as pytorch-triton-xpu)")
    else:
        inductor = CompileOption(backend="inductor", available=True,
                                 reason=f"Inductor with Triton's Intel GPU backend on {label} (torch {build.version})")
    return [inductor, CompileOption(backend="aot_eager", available=True,
                                    reason="AOTAutograd with eager XPU kernels needs no Triton")]
