// swift-tools-version:6.0
// A file labeller on Earshot: voice activity segments of the files named on the command line.
import PackageDescription

let package = Package(
    name: "FileLabeller",
    dependencies: [.package(name: "Earshot", path: "../..")],
    targets: [.executableTarget(name: "FileLabeller", dependencies: [.product(name: "Earshot", package: "Earshot")])],
    swiftLanguageModes: [.v6]
)
