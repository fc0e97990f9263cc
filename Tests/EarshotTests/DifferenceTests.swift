import EarshotTestSupport
import Testing

@Suite("The tests' own measure of a difference")
struct DifferenceTests {
    @Test("maxAbsDifference: the largest |a - b|; infinite where one side is NaN or the lengths differ; NaN against NaN is equal")
    func nanAndLengths() {
        #expect(maxAbsDifference([1, -2, 3], [1.5, -2, 2]) == 1)
        #expect(maxAbsDifference([1, .nan, 3], [1, 2, 3]) == .infinity)
        #expect(maxAbsDifference([1, 2, 3], [1, 2, .nan]) == .infinity)
        #expect(maxAbsDifference([Float.nan, 1], [Float.nan, 1.25]) == 0.25)
        #expect(maxAbsDifference([1, 2], [1, 2, 3]) == .infinity)
        #expect(maxAbsDifference([Float](), []) == 0)
    }
}
