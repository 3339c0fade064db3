"""From build to fleet: publish a build as OCI artifacts, promote a release to a channel
with a signed statement, and a device agent that pulls, verifies, activates and rolls back.

    build/<recipe>/artifacts/<target>/manifest.json      (run/artifacts.py)
        │  edgebuild publish BUILD --to oci-layout:DIR --version V      (publish.py)
        ▼
    DIR/ oci-layout, index.json (tags), blobs/sha256/…   (layout.py, records.py)
      or https://HOST/REPO, an OCI distribution registry  (remote.py)
        │  edgebuild promote oci-layout:DIR:V CHANNEL --key K            (promote.py)
        ▼
    tag CHANNEL -> signed statement {channel, index, sequence, expiry}   (statement.py)
        │  edgebuild agent --from oci-layout:DIR --channel C --target T  (agent.py)
        ▼
    ROOT/releases/<digest>/, ROOT/current -> it, ROOT/state.json         (state.py)

The agent's side (agent, state, statement, layout, remote, records, health) imports the
standard library, pydantic (edgebuild's records) and `cryptography` — never torch,
ONNX or numpy at import time: the health check that loads the model runs in a
subprocess (health.py). docs/fleet.md.
"""
