extension Builder {
    /// An FFT step whose real and imaginary parts (its output's halves, or its output and its paired
    /// sines' output: `fuseFFTPairs`) are only squared and summed (and perhaps the square root
    /// taken), as an exported STFT's power or magnitude is: the step writes that sum itself, and
    /// the element-wise steps go.
    mutating func fuseSpectra() {
        var removed = Set<Int>()
        for i in steps.indices {
            guard var fft = steps[i] as? FFTConvStep, fft.output == .filters, fft.basis.part == .both || fft.sines != nil, fft.items == 1,
                  fft.bias == nil, fft.sines?.bias == nil, !isOutput(fft.y), !(fft.sines.map { isOutput($0.y) } ?? false) else { continue }
            let half = fft.y.count / 2
            let (real, imaginary) = fft.sines.map { (fft.y, $0.y) }
                ?? (Ref(shared: false, offset: fft.y.offset, count: half), Ref(shared: false, offset: fft.y.offset + half, count: half))
            func square(of ref: Ref) -> Int? {
                let r = steps(reading: ref)
                guard r.count == 1, let step = steps[r[0]] as? BinaryStep, step.kind == .square, step.a == ref, step.mapA == nil else { return nil }
                return r[0]
            }
            guard steps(reading: fft.y).count == (fft.sines == nil ? 2 : 1), let re = square(of: real), let im = square(of: imaginary),
                  let sq1 = steps[re] as? BinaryStep, let sq2 = steps[im] as? BinaryStep else { continue }
            let sums = steps(reading: sq1.y)
            guard !isOutput(sq1.y), !isOutput(sq2.y), sums.count == 1, steps(reading: sq2.y) == sums, let sum = steps[sums[0]] as? BinaryStep, sum.kind == .add,
                  sum.mapA == nil, sum.mapB == nil, Set([sum.a.offset, sum.b.offset]) == Set([sq1.y.offset, sq2.y.offset]) else { continue }
            var gone = [re, im, sums[0]]
            fft.output = .power
            fft.sines = nil
            fft.y = sum.y
            let roots = steps(reading: sum.y)
            if !isOutput(sum.y), roots.count == 1, let root = steps[roots[0]] as? UnaryStep, root.kind == .sqrt, root.x == sum.y {
                fft.output = .magnitude
                fft.y = root.y
                gone.append(roots[0])
            }
            for j in gone {
                let y = (steps[j] as? BinaryStep)?.y ?? (steps[j] as? UnaryStep)?.y
                for (tensor, ref) in refs where ref == y {
                    if let node = producers[tensor], kernels[node] == "element-wise" { kernels[node] = "with the FFT" }
                }
            }
            steps[i] = fft
            removed.formUnion(gone)
        }
        steps = steps.indices.filter { !removed.contains($0) }.map { steps[$0] }
    }

    /// A Conv whose output only the next Conv reads, both with fields taken from the input
    /// transposed to [plane][channels] (or Winograd's tiles): the first writes that layout and the
    /// second reads it as it is, with no transposes between them; so too with a pooling step
    /// between them, which then pools channels-last.
    mutating func linkChannelsLast() {
        /// The Conv that is the only reader of `y` ([channels][plane]) and can take it channels-last.
        func onlyReader(of y: Ref, channels: Int, plane: Int) -> Int? {
            guard !isOutput(y) else { return nil }
            let readers = steps(reading: y)
            // The same tensor, not a reshaped view of it.
            guard readers.count == 1, let second = steps[readers[0]] as? ConvStep, second.x == y, second.readsChannelsLast,
                  second.groups == 1, second.items == 1, second.channels == channels,
                  second.plane == plane else { return nil }
            return readers[0]
        }
        for i in steps.indices {
            // Conv, pooling of one item, Conv: the pooling too runs channels-last.
            if var first = steps[i] as? ConvStep, first.writesChannelsLast, first.groups == 1, first.items == 1, !isOutput(first.y),
               steps(reading: first.y) == [i + 1], var pool = steps[i + 1] as? PoolStep, pool.x == first.y, pool.planes == first.outChannels,
               pool.plane == first.positions, let j = onlyReader(of: pool.y, channels: pool.planes, plane: pool.divisors.count),
               var second = steps[j] as? ConvStep {
                writeChannelsLast(&first)
                pool.channelsLast = true
                second.inputChannelsLast = true
                for (tensor, ref) in refs where ref == pool.y {
                    if let node = producers[tensor], kernels[node] == "pooling" { kernels[node] = "pooling, channels-last" }
                }
                steps[i] = first
                steps[i + 1] = pool
                steps[j] = second
            }
            if var first = steps[i] as? ConvStep, first.writesChannelsLast, first.groups == 1, first.items == 1,
               let j = onlyReader(of: first.y, channels: first.outChannels, plane: first.positions), var second = steps[j] as? ConvStep {
                writeChannelsLast(&first)
                second.inputChannelsLast = true
                steps[i] = first
                steps[j] = second
            }
            // A power or magnitude spectrum: its rows (one per position) need no transpose.
            if var fft = steps[i] as? FFTConvStep, fft.output != .filters, fft.items == 1, !fft.channelsLast,
               let j = onlyReader(of: fft.y, channels: fft.fft.size / 2 + 1, plane: fft.positions), var second = steps[j] as? ConvStep {
                fft.channelsLast = true
                second.inputChannelsLast = true
                steps[i] = fft
                steps[j] = second
            }
        }
        for i in steps.indices {
            if var conv = steps[i] as? ConvStep, conv.direct != nil {
                conv.settle()
                steps[i] = conv
            }
        }
    }

    /// `conv` writes its output channels-last; where that takes the direct path, its node says so.
    private mutating func writeChannelsLast(_ conv: inout ConvStep) {
        conv.writeChannelsLast()
        guard conv.positionMajor == nil, conv.direct != nil else { return }
        for (tensor, ref) in refs where ref == conv.y {
            if let node = producers[tensor], kernels[node]?.hasPrefix("packed product") == true { kernels[node] = "direct product" }
        }
    }
}
