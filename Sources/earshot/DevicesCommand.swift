import Earshot

enum DevicesCommand {
    static func run(_ words: [String]) throws {
        _ = try Arguments(words, valued: [], switches: [], command: "devices")
        let (pcms, cards) = CaptureDevice.list()
        print("sound cards:")
        if cards.isEmpty { print("  (none found: no sound card on this machine)") }
        for card in cards { print("  \(card.name)  \(card.description)") }
        print("capture PCMs (use with earshot listen --device NAME):")
        if pcms.isEmpty { print("  (none)") }
        for pcm in pcms { print("  \(pcm.name)" + (pcm.description.isEmpty ? "" : "  \(pcm.description)")) }
    }
}
