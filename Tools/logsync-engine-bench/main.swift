print("logsync-engine-bench: not written yet")
