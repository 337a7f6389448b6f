"""A plugin that fails the way real ones do: its exception quotes a token and a URL with credentials."""
import os

from ezpz import hookimpl


@hookimpl
def ezpz_probe_devices(build, environ):
    raise RuntimeError(
        f"hub login failed with token {environ.get('HF_TOKEN')!r} (account {environ.get('SITE_ACCOUNT_ID')}) "
        f"at {environ.get('TORCH_HUB_URL')}; log at {os.environ.get('NCCL_DEBUG_FILE')}"
    )
