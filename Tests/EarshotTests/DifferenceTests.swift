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

    @Test("maxRelativeDifference: |a - reference| / max(1, |reference|), with maxAbsDifference's NaN and length rules")
    func relative() {
        #expect(maxRelativeDifference([1, 200, 3], [1, 100, 3.5]) == 1)
        #expect(maxRelativeDifference([0.5, 0.25], [0.25, 0.25]) == 0.25)
        #expect(maxRelativeDifference([1, .nan, 3], [1, 2, 3]) == .infinity)
        #expect(maxRelativeDifference([Float.infinity], [1]) == .infinity)
        #expect(maxRelativeDifference([Float.nan, .infinity], [.nan, .infinity]) == 0)
        #expect(maxRelativeDifference([1, 2], [1]) == .infinity)
    }
}
