print("emulator")
