// swift-tools-version:6.0
// A multi-channel session on Earshot: each channel of a file its own stream and state, one model,
// batched steps; channels can also join and leave.
import PackageDescription

let package = Package(
    name: "MultiChannel",
    dependencies: [.package(name: "Earshot", path: "../..")],
    targets: [.executableTarget(name: "MultiChannel", dependencies: [.product(name: "Earshot", package: "Earshot")])],
    swiftLanguageModes: [.v6]
)
