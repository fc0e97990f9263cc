import EarshotTestSupport
import Foundation
import Testing

/// Package.swift's targets and their declared dependencies, read from its text: `.target`,
/// `.executableTarget` and `.testTarget` with `name:` and a `dependencies:` list of strings.
enum PackageManifest {
    static func targets() throws -> [String: [String]] {
        let text = try String(contentsOf: Repo.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let declaration = try Regex(#"\.(?:target|executableTarget|testTarget)\(\s*name:\s*"([^"]+)"(?:,\s*dependencies:\s*\[([^\]]*)\])?"#)
        var targets: [String: [String]] = [:]
        for match in text.matches(of: declaration) {
            guard let name = match.output[1].substring.map(String.init) else { continue }
            let list = match.output[2].substring.map(String.init) ?? ""
            targets[name] = list.matches(of: #/"([^"]+)"/#).map { String($0.output.1) }
        }
        return targets
    }

    /// Every target `name` depends on, directly or not.
    static func closure(of name: String, in targets: [String: [String]]) -> Set<String> {
        var seen: Set<String> = []
        var queue = targets[name] ?? []
        while let next = queue.popLast() {
            guard seen.insert(next).inserted else { continue }
            queue += targets[next] ?? []
        }
        return seen
    }

    /// The modules the Swift files under `folder` import (`import M`, `@testable import M`, `@_exported import M`).
    static func imports(under folder: String) throws -> Set<String> {
        let root = Repo.root.appendingPathComponent(folder)
        let files = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL }
            .filter { $0.pathExtension == "swift" } ?? []
        var modules: Set<String> = []
        for file in files {
            for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n") {
                if let m = line.wholeMatch(of: #/\s*(?:@\w+\s+)*import\s+(\w+)\s*/#) { modules.insert(String(m.output.1)) }
            }
        }
        return modules
    }

    /// Modules of the toolchain and the system, which no target declares.
    static let system: Set<String> = ["Foundation", "FoundationXML", "Glibc", "Dispatch", "Synchronization", "Testing", "XCTest"]
}

@Suite("The package: each product builds what it needs")
struct PackageTests {
    @Test("The command-line tool declares every module it imports")
    func toolDeclaresItsImports() throws {
        let targets = try PackageManifest.targets()
        let declared = Set(try #require(targets["earshot"]))
        let imported = try PackageManifest.imports(under: "Sources/earshot").subtracting(PackageManifest.system)
        #expect(imported.contains("Earshot") && imported.contains("EarshotCluster"), "\(imported)")
        #expect(imported.subtracting(declared).isEmpty, "imported by Sources/earshot but not declared: \(imported.subtracting(declared).sorted())")
    }

    @Test("The core product holds no transport: Earshot depends on neither Redis (hiredis) nor the Wyoming service (epoll)")
    func coreHasNoTransport() throws {
        let targets = try PackageManifest.targets()
        let core = PackageManifest.closure(of: "Earshot", in: targets)
        #expect(core.contains("EarshotModel") && core.contains("EarshotAudio"), "\(core.sorted())")
        let transports: Set<String> = ["EarshotRedis", "CHiredis", "EarshotWyoming", "CEarshotSystem", "EarshotServe", "EarshotCluster"]
        #expect(core.isDisjoint(with: transports), "Earshot depends on \(core.intersection(transports).sorted())")
        // Only the cluster's product brings hiredis in.
        let linkingHiredis = targets.keys.filter { PackageManifest.closure(of: $0, in: targets).contains("CHiredis") && !$0.hasSuffix("Tests") }
        #expect(Set(linkingHiredis) == ["EarshotRedis", "EarshotCluster", "earshot"], "\(linkingHiredis.sorted())")
    }
}
