print("two-devices: not written yet")
