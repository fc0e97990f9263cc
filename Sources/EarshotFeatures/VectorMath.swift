/// Natural logarithm of eight positive, normal floats at once, to about 1 ulp.
/// x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln(m) = 2 atanh(s), s = (m - 1) / (m + 1),
/// |s| <= 0.1716, summed to s^11 (the next term is below 4e-10).
@inline(__always)
func naturalLog(_ x: SIMD8<Float>) -> SIMD8<Float> {
    let bits = unsafeBitCast(x, to: SIMD8<UInt32>.self)
    var exponent = SIMD8<Int32>(truncatingIfNeeded: bits &>> 23) &- 127
    var m = unsafeBitCast((bits & 0x007F_FFFF) | 0x3F80_0000, to: SIMD8<Float>.self)
    let high = m .> 1.414_213_5
    m.replace(with: m * 0.5, where: high)
    exponent.replace(with: exponent &+ 1, where: high)
    let s = (m - 1) / (m + 1)
    let s2 = s * s
    var p = SIMD8<Float>(repeating: 2.0 / 11)
    p = p * s2 + 2.0 / 9
    p = p * s2 + 2.0 / 7
    p = p * s2 + 2.0 / 5
    p = p * s2 + 2.0 / 3
    p = p * s2 + 2
    return SIMD8<Float>(exponent) * 0.693_147_18 + s * p
}

/// values[i] = scale * ln(max(values[i] + offset, floor)) - shift, eight at a time.
/// Returns the largest result.
func scaledLog(_ values: UnsafeMutableBufferPointer<Float>, offset: Float, floor: Float, scale: Float, shift: Float) -> Float {
    // Subnormal floors would leave the range the logarithm above handles.
    let floor = max(floor, Float.leastNormalMagnitude)
    guard let base = values.baseAddress else { return -.infinity }
    let n = values.count
    var largest = SIMD8<Float>(repeating: -.infinity)
    var i = 0
    while i < n {
        var x = SIMD8<Float>(repeating: 1)
        let lanes = min(8, n - i)
        if lanes == 8 {
            x = UnsafeRawPointer(base + i).loadUnaligned(as: SIMD8<Float>.self)
        } else {
            for l in 0..<lanes { x[l] = base[i + l] }
        }
        let y = naturalLog((x + offset).replacing(with: floor, where: (x + offset) .< floor)) * scale - shift
        if lanes == 8 {
            UnsafeMutableRawPointer(base + i).storeBytes(of: y, as: SIMD8<Float>.self)
            largest.replace(with: y, where: y .> largest)
        } else {
            for l in 0..<lanes {
                base[i + l] = y[l]
                largest[l] = max(largest[l], y[l])
            }
        }
        i += 8
    }
    return largest.max()
}
