@_exported import EarshotJSON
