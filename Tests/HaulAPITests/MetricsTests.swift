import XCTest
@testable import HaulAPI

final class MetricsTests: XCTestCase {
    func testNumbersAndLabelsInTheExpositionFormat() {
        XCTAssertEqual(PrometheusText.number(3), "3")
        XCTAssertEqual(PrometheusText.number(0.25), "0.25")
        XCTAssertEqual(PrometheusText.number(.infinity), "+Inf")
        XCTAssertEqual(PrometheusText.escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd")
        var text = PrometheusText()
        text.sample("m", ["b": "2", "a": "1"], 1.5)
        XCTAssertEqual(text.text, "m{a=\"1\",b=\"2\"} 1.5\n")
    }

    func testTheHistogramIsCumulativeAndCountsEveryRequest() {
        let metrics = RequestMetrics()
        metrics.record(route: "/x", method: "GET", status: 200, seconds: 0.0001)
        metrics.record(route: "/x", method: "GET", status: 200, seconds: 0.003)
        metrics.record(route: "/x", method: "BREW", status: 405, seconds: 5)
        var text = PrometheusText()
        metrics.render(into: &text)
        let lines = Set(text.text.split(separator: "\n").map(String.init))
        XCTAssertTrue(lines.contains("haul_http_requests_total{method=\"GET\",route=\"/x\",status=\"200\"} 2"))
        XCTAssertTrue(lines.contains("haul_http_requests_total{method=\"other\",route=\"/x\",status=\"405\"} 1"))
        XCTAssertTrue(lines.contains("haul_http_request_duration_seconds_bucket{le=\"0.0005\",route=\"/x\"} 1"))
        XCTAssertTrue(lines.contains("haul_http_request_duration_seconds_bucket{le=\"0.005\",route=\"/x\"} 2"))
        XCTAssertTrue(lines.contains("haul_http_request_duration_seconds_bucket{le=\"1\",route=\"/x\"} 2"))
        XCTAssertTrue(lines.contains("haul_http_request_duration_seconds_bucket{le=\"+Inf\",route=\"/x\"} 3"))
        XCTAssertTrue(lines.contains("haul_http_request_duration_seconds_count{route=\"/x\"} 3"))
    }

    func testRequestDurationsAreLoggedInMilliseconds() {
        XCTAssertEqual(API.milliseconds(0.000412), "0.412")
        XCTAssertEqual(API.milliseconds(0.0000004), "0.000")
        XCTAssertEqual(API.milliseconds(1.5), "1500.000")
        XCTAssertEqual(API.milliseconds(0.01234), "12.340")
    }
}
