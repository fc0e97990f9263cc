print("earshot")
