"""Run a script under ``python -m ezpz.cuda_compat``'s session, then print where its model's parameters live.

``python cuda_compat_devices.py SCRIPT [ARGS...]``: the last stdout line is JSON, ``{"param_devices": [...],
"report": PATH}``, read from the script's own globals (``model``, unwrapped from DDP) after it ran: the check
that the work went to the chosen device, not to a CPU fallback.
"""
import json
import sys

from ezpz.cuda_compat.session import Session

session = Session(sys.argv[1], sys.argv[2:])
try:
    session.start()
    session.run()
finally:
    session.finish()
model = session.globals.get("model")
model = getattr(model, "module", model)
devices = sorted({str(p.device) for p in model.parameters()}) if model is not None else []
print(json.dumps({"param_devices": devices, "report": str(session.report_path)}))
