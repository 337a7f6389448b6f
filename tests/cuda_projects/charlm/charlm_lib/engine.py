"""Device set-up and a timed training step, written for CUDA."""
import torch


def cuda_device(seed):
    if not torch.cuda.is_available():
        raise SystemExit("this project needs a CUDA GPU")
    torch.cuda.set_device(0)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    major, _ = torch.cuda.get_device_capability()
    fast_attention = major >= 8  # Ampere or newer
    return torch.device("cuda"), fast_attention


def timed_step(model, optimizer, scaler, x, y):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    with torch.cuda.amp.autocast(dtype=torch.float16):
        _, loss = model(x, y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    end.record()
    torch.cuda.synchronize()
    return loss.item(), start.elapsed_time(end), torch.cuda.max_memory_allocated()
