// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Earshot",
    products: [
        .library(name: "Earshot", targets: ["Earshot"]),
        // ONNX, TFLite and openWakeWord models imported as Earshot packages.
        .library(name: "EarshotImport", targets: ["EarshotImport"]),
        // The Wyoming service: an event loop and the protocol's session on it.
        .library(name: "EarshotServe", targets: ["EarshotServe"]),
        // Workers on Redis Streams (links hiredis).
        .library(name: "EarshotCluster", targets: ["EarshotCluster"]),
        // Training streaming classifiers with the runtime's own layers and features.
        .library(name: "EarshotTraining", targets: ["EarshotTraining"]),
        .executable(name: "earshot", targets: ["earshot"]),
    ],
    targets: [
        // System libraries (Debian: libsndfile1-dev, libasound2-dev, libfftw3-dev, libsoxr-dev).
        .systemLibrary(name: "CSndFile", pkgConfig: "sndfile", providers: [.apt(["libsndfile1-dev"])]),
        .systemLibrary(name: "CALSA", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        .systemLibrary(name: "CFFTW", pkgConfig: "fftw3f", providers: [.apt(["libfftw3-dev"])]),
        .systemLibrary(name: "CSoxr", pkgConfig: "soxr", providers: [.apt(["libsoxr-dev"])]),
        // Redis's C client (Debian: libhiredis-dev), for workers on Redis Streams. No pkg-config:
        // its flags hold a -D that SwiftPM refuses, and the header is in /usr/include/hiredis.
        .systemLibrary(name: "CHiredis", providers: [.apt(["libhiredis-dev"])]),
        // zlib (Debian: zlib1g-dev; zlib1g is on every Debian system), which inflates the files of
        // a downloaded wheel.
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),

        .target(name: "EarshotAudio", dependencies: ["CSndFile", "CALSA", "CSoxr", "CEarshotKernels"]),
        .target(name: "EarshotFeatures", dependencies: ["CFFTW", "CEarshotKernels"], swiftSettings: [.unsafeFlags(["-O"])]),
        // Dense kernels in C, compiled per instruction set and chosen at run time. Math functions
        // never set errno, so that loops of sqrtf vectorize (IEEE results are the same).
        .target(name: "CEarshotKernels", cSettings: [.unsafeFlags(["-fno-math-errno", "-O2"])]),
        .target(name: "EarshotModel", dependencies: ["EarshotFeatures", "CEarshotKernels", "EarshotGraph", "EarshotJSON"], swiftSettings: [.unsafeFlags(["-O"])]),
        .target(name: "Earshot", dependencies: ["EarshotAudio", "EarshotFeatures", "EarshotModel", "EarshotJSON", "EarshotGraph"]),
        // The importers: ONNX, TFLite and openWakeWord models as graphs over one GraphSpecBuilder.
        .target(name: "EarshotImport", dependencies: ["EarshotModel", "EarshotGraph", "EarshotFeatures", "EarshotONNX", "EarshotTFLite", "EarshotJSON"]),
        // A service's event loop, knowing no protocol, and the Wyoming protocol on it.
        .target(name: "EarshotServe", dependencies: ["Earshot", "EarshotWyoming", "EarshotTelemetry", "CEarshotSystem"]),
        // Workers on Redis Streams, their publishers and events: the one product that links hiredis.
        .target(name: "EarshotCluster", dependencies: ["Earshot", "EarshotRedis", "EarshotTelemetry"]),
        // A Redis client on hiredis: commands, pipelines and replies, with typed errors.
        .target(name: "EarshotRedis", dependencies: ["CHiredis"]),
        // epoll, eventfd and accept4 for the service's loop (Linux calls Glibc's module leaves out).
        .target(name: "CEarshotSystem"),
        // The Wyoming protocol's events and their JSON, read and written in Swift (no sockets).
        .target(name: "EarshotWyoming", dependencies: ["EarshotJSON"]),
        // JSON values read and written by hand: the one JSON writer of the package.
        .target(name: "EarshotJSON"),
        // What an operator watches of a service or worker: Prometheus metrics and health over a
        // minimal HTTP responder, log records as text or JSON lines.
        .target(name: "EarshotTelemetry", dependencies: ["Earshot", "EarshotJSON"]),
        // Trains classifiers made of runtime layers, with the runtime's own features and products.
        // Optimized in debug builds too: the tests train real models, which unoptimized loops
        // would make ten times slower.
        .target(name: "EarshotTraining", dependencies: ["Earshot", "EarshotImport", "EarshotAudio", "EarshotFeatures", "EarshotModel", "EarshotGraph", "EarshotJSON"],
                swiftSettings: [.unsafeFlags(["-O"])]),
        // ONNX files read in Swift: the protobuf wire format and ONNX's messages (onnx.proto).
        .target(name: "EarshotONNX"),
        // TFLite files read in Swift: FlatBuffers and TFLite's schema (schema.fbs).
        .target(name: "EarshotTFLite"),
        // Graphs of ops over N-D tensors, with ONNX's semantics: the reference kernels.
        // Optimized in every configuration: its loops are what a graph step runs, and a debug
        // build of them would make the tests that run imported models over whole files crawl.
        .target(name: "EarshotGraph", dependencies: ["CEarshotKernels", "EarshotFeatures"], swiftSettings: [.unsafeFlags(["-O"])]),
        // Models fetched by name from the catalog: downloads (curl, run), their cache, SHA-256, zip.
        // Optimized in every configuration: it hashes and inflates files of tens of megabytes.
        .target(name: "EarshotFetch", dependencies: ["Earshot", "EarshotJSON", "CZlib"], swiftSettings: [.unsafeFlags(["-O"])]),
        // The command-line tool: it declares every module it imports (PackageTests checks).
        .executableTarget(name: "earshot", dependencies: ["Earshot", "EarshotServe", "EarshotCluster", "EarshotImport", "EarshotTraining", "CEarshotKernels",
                                                          "EarshotWyoming", "CEarshotSystem", "EarshotJSON", "EarshotAudio", "EarshotModel", "EarshotRedis",
                                                          "EarshotFetch", "EarshotTelemetry"]),

        // Helpers shared by the test targets (seeded random numbers, reference files, paths): the
        // model layer and libsndfile only, so that a target's tests build what they test.
        .target(name: "EarshotTestSupport", dependencies: ["EarshotModel", "CSndFile"], path: "Tests/Support"),
        // What the tests of the products and the tool share: the built earshot run as a process,
        // the library's fixtures (the bundled model, the samples, a stream's events).
        .target(name: "EarshotCommandTestSupport", dependencies: ["Earshot", "EarshotTestSupport", "EarshotJSON"], path: "Tests/CommandSupport"),
        .testTarget(name: "EarshotAudioTests", dependencies: ["EarshotAudio", "CSndFile", "EarshotTestSupport"]),
        .testTarget(name: "EarshotFeaturesTests", dependencies: ["EarshotFeatures", "EarshotAudio", "EarshotTestSupport"],
                    exclude: ["Goldens"]),
        .testTarget(name: "EarshotModelTests", dependencies: ["EarshotModel", "EarshotGraph", "EarshotAudio", "CEarshotKernels", "EarshotTestSupport"],
                    exclude: ["Goldens"]),
        .testTarget(name: "EarshotONNXTests", dependencies: ["EarshotONNX", "EarshotTestSupport"], exclude: ["Fixtures"]),
        .testTarget(name: "EarshotImportTests", dependencies: ["EarshotImport", "EarshotModel"]),
        .testTarget(name: "EarshotGraphTests", dependencies: ["EarshotGraph", "EarshotTestSupport"], exclude: ["Goldens"]),
        .testTarget(name: "EarshotTrainingTests", dependencies: ["EarshotTraining", "Earshot", "EarshotModel", "EarshotAudio", "EarshotGraph", "EarshotImport", "EarshotTestSupport"]),
        .testTarget(name: "EarshotWyomingTests", dependencies: ["EarshotWyoming", "EarshotTestSupport"], exclude: ["Goldens"]),
        .testTarget(name: "EarshotFetchTests", dependencies: ["EarshotFetch", "EarshotTestSupport"]),
        .testTarget(name: "EarshotTests", dependencies: ["Earshot", "EarshotServe", "EarshotImport", "EarshotGraph", "EarshotTraining", "earshot",
                                                        "EarshotTestSupport", "EarshotCommandTestSupport", "EarshotFetch"],
                    exclude: ["Goldens", "Expected"]),
        .testTarget(name: "EarshotServeTests", dependencies: ["EarshotServe", "EarshotWyoming", "EarshotFeatures", "earshot", "EarshotTestSupport", "EarshotTelemetry",
                                                             "EarshotCommandTestSupport"]),
        .testTarget(name: "EarshotClusterTests", dependencies: ["EarshotCluster", "EarshotRedis", "earshot", "EarshotTestSupport", "EarshotTelemetry",
                                                               "EarshotCommandTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
