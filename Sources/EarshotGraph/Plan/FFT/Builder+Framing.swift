extension Builder {
    /// An RFFT whose rows are frames copied out of one tensor (a copy of one run a row) and
    /// multiplied by a window (a Mul by a constant row, broadcast over the rows), each the only
    /// reader of the value before it: the RFFT step reads each frame where it lies and multiplies
    /// it by the window as it takes it (the Mul's bits), and the frames and windowed frames are not
    /// written (BirdNET V2.4's two spectrograms: 4 and 2 MB, twice over).
    mutating func fuseFraming() {
        var removed = Set<Int>()
        for i in steps.indices {
            guard var fft = steps[i] as? RFFTStep, fft.starts == nil, fft.window == nil else { continue }
            var gone: [Int] = []
            if let (k, mul) = onlyWriter(of: fft.x, readBy: i, as: BinaryStep.self), mul.kind == .mul,
               let (frames, window) = windowed(mul, width: fft.width) {
                fft.window = window
                fft.x = frames
                gone.append(k)
            }
            if let (k, move) = onlyWriter(of: fft.x, readBy: gone.first ?? i, as: MoveStep.self), move.sources.count == 1,
               let starts = Self.frameStarts(move.runs, rows: fft.rows, width: fft.width) {
                fft.starts = starts
                fft.x = move.sources[0]
                gone.append(k)
            }
            guard !gone.isEmpty else { continue }
            for k in gone {
                for ref in steps[k].writes {
                    for (tensor, r) in refs where r == ref {
                        if let node = producers[tensor], kernels[node] == "copy" || kernels[node] == "element-wise" { kernels[node] = "with the FFT" }
                    }
                }
            }
            steps[i] = fft
            removed.formUnion(gone)
        }
        steps = steps.indices.filter { !removed.contains($0) }.map { steps[$0] }
    }

    /// The step before `reader` that alone writes `ref` whole, of type `S`, when `reader` is the
    /// only step that reads it and it is no output.
    private func onlyWriter<S: Step>(of ref: Ref, readBy reader: Int, as: S.Type) -> (Int, S)? {
        guard !isOutput(ref), steps(reading: ref) == [reader],
              let k = steps[..<reader].lastIndex(where: { $0.writes.contains { $0.overlaps(ref) } }),
              let step = steps[k] as? S, step.writes == [ref] else { return nil }
        return (k, step)
    }

    /// The frames and the window of a Mul of rows of `width` values by one constant row (either
    /// operand).
    private func windowed(_ mul: BinaryStep, width: Int) -> (Ref, [Float])? {
        for (frames, framesMap, window, map) in [(mul.a, mul.mapA, mul.b, mul.mapB), (mul.b, mul.mapB, mul.a, mul.mapA)] {
            guard window.shared, !window.coded, window.count == width, framesMap == nil, frames.count == mul.y.count,
                  let map, map.indices.allSatisfy({ Int(map[$0]) == $0 % width }) else { continue }
            return (frames, Array(shared[window.offset..<(window.offset + width)]))
        }
        return nil
    }

    /// Where each of `rows` rows of `width` values starts in the copy's one source, when each row
    /// is one run of it.
    static func frameStarts(_ runs: [Run], rows: Int, width: Int) -> [Int]? {
        guard runs.count == rows else { return nil }
        let sorted = runs.sorted { $0.dst < $1.dst }
        guard sorted.enumerated().allSatisfy({ $1.dst == $0 * width && $1.count == width && $1.source == 0 }) else { return nil }
        return sorted.map(\.src)
    }
}
