import EarshotCommandTestSupport
import Foundation
import Testing

@Suite("bench peak: the machine's multiply-add peaks, path by path")
struct BenchPeakTests {
    /// The CPU's flags as the kernel lists them (/proc/cpuinfo), the probe's independent witness.
    private static func cpuFlags() throws -> Set<String> {
        let text = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("flags") })
        return Set(line.split(separator: ":")[1].split(separator: " ").map(String.init))
    }

    @Test("Each path runs exactly when /proc/cpuinfo lists its instructions; its rate is what its width gives against fp32 FMA")
    func paths() throws {
        // Each path's best of three runs: on a machine shared with other work (and with the other
        // tests beside this one) a single 0.2 s probe can land in another process's time slice.
        var rows: [[String: Any]] = []
        var rate: [String: Double] = [:]
        for _ in 0..<3 {
            let r = try runEarshot(["bench", "peak", "--seconds", "0.2", "--json"])
            #expect(r.status == 0, "\(r.err)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])
            rows = try #require(json["paths"] as? [[String: Any]])
            for row in rows {
                let key = try #require(row["path"] as? String)
                if let one = row["gmacPerSecondOneCore"] as? Double, let all = row["gmacPerSecondAllCores"] as? Double {
                    // Several cores at once give at least half of one core's rate (the other tests
                    // run beside this one).
                    #expect(one > 0 && all > 0.5 * one, "\(key): \(one) one core, \(all) all")
                    rate[key] = max(rate[key] ?? 0, one)
                } else {
                    #expect((row["unavailable"] as? String)?.isEmpty == false, "\(key)")
                }
            }
        }
        let flags = try Self.cpuFlags()
        let expected: [String: [String]] = [
            "fp32Avx512": ["avx512f"], "fp32Avx2": ["avx2", "fma"], "int8Vnni": ["avx512_vnni", "avx512bw"],
            "bf16Avx512": ["avx512_bf16"], "amxBf16": ["amx_tile", "amx_bf16", "amx_int8"], "amxInt8": ["amx_tile", "amx_bf16", "amx_int8"],
        ]
        #expect(Set(rows.compactMap { $0["path"] as? String }) == Set(expected.keys))
        for (key, needs) in expected where !key.hasPrefix("amx") {
            #expect((rate[key] != nil) == needs.allSatisfy(flags.contains), "\(key)")
        }
        // AMX: with its three flags, a rate or the kernel's refusal; without them, the CPU's reason.
        let reason = { (key: String) in rows.first { $0["path"] as? String == key }?["unavailable"] as? String }
        for key in ["amxBf16", "amxInt8"] {
            if expected[key]!.allSatisfy(flags.contains) {
                #expect(rate[key] != nil || reason(key)?.contains("arch_prctl") == true, "\(key)")
                if let amx = rate[key], let fp32 = rate["fp32Avx512"] { #expect(amx > 2 * fp32, "\(key) \(amx) against fp32 \(fp32)") }
            } else {
                #expect(rate[key] == nil && reason(key)?.hasPrefix("CPUID reports no AMX") == true, "\(key)")
            }
        }
        // A 512-bit vpdpbusd does 64 multiply-adds where an FMA does 16: even on a core that
        // splits 512-bit operations (and with other tests beside this one), int8 comes out ahead.
        // A vdpbf16ps does 32, but how many issue a cycle differs by core: AMD's Zen 4 runs them
        // as fast as FMAs (about twice fp32's rate), Intel's Sapphire Rapids on one port where
        // FMAs have two (about half of fp32's rate, measured). Either way the loop runs at a
        // rate of the same order as fp32's, which a broken probe would not.
        if let fp32 = rate["fp32Avx512"] {
            #expect(fp32 > 1 && fp32 < 1000)
            if let vnni = rate["int8Vnni"] { #expect(vnni > 1.5 * fp32, "VNNI \(vnni) against fp32 \(fp32)") }
            if let bf16 = rate["bf16Avx512"] { #expect(bf16 > 0.25 * fp32 && bf16 < 4 * fp32, "BF16 \(bf16) against fp32 \(fp32)") }
        }
    }
}
