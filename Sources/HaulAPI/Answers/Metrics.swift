import FoundationEssentials
import Glibc
import HaulCore

/// API request counters and latency histograms, for `GET /metrics`. Labelled by route pattern, never by raw path,
/// so a client cannot grow the label set. Confined to the loop thread.
final class RequestMetrics {
    /// Upper bounds of the latency buckets, in seconds.
    static let buckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]

    private struct Key: Hashable {
        let route: String
        let method: String
        let status: Int
    }

    private struct Histogram {
        var counts = [UInt64](repeating: 0, count: RequestMetrics.buckets.count)
        var count: UInt64 = 0
        var sum = 0.0

        mutating func observe(_ seconds: Double) {
            if let bucket = RequestMetrics.buckets.firstIndex(where: { seconds <= $0 }) { counts[bucket] += 1 }
            count += 1
            sum += seconds
        }
    }

    /// Methods outside this set share one label, like unknown routes.
    private static let knownMethods: Set<String> = ["GET", "HEAD", "POST", "PATCH", "DELETE", "OPTIONS", "PUT"]

    private var requests: [Key: UInt64] = [:]
    private var latency: [String: Histogram] = [:]
    /// Of those, the status reads the API's own loop answered from the engine's published answers.
    private var answeredBeside: UInt64 = 0

    /// Runs for every request: updates in place, so no bucket array is copied.
    func record(route: String, method: String, status: Int, seconds: Double, beside: Bool = false) {
        if beside { answeredBeside += 1 }
        let label = RequestMetrics.knownMethods.contains(method) ? method : "other"
        requests[Key(route: route, method: label, status: status), default: 0] += 1
        latency[route, default: Histogram()].observe(seconds)
    }

    /// Appends the request families to an exposition.
    func render(into out: inout PrometheusText) {
        out.family(
            "haul_http_requests_total", type: "counter", help: "API requests answered, by route, method and status.")
        for (key, count) in requests.sorted(by: {
            ($0.key.route, $0.key.method, $0.key.status) < ($1.key.route, $1.key.method, $1.key.status)
        }) {
            out.sample(
                "haul_http_requests_total",
                ["route": key.route, "method": key.method, "status": String(key.status)], Double(count))
        }
        out.family(
            "haul_http_request_duration_seconds", type: "histogram",
            help: "Time to answer an API request (until an event stream opens), by route.")
        for (route, histogram) in latency.sorted(by: { $0.key < $1.key }) {
            var cumulative: UInt64 = 0
            for (bound, count) in zip(RequestMetrics.buckets, histogram.counts) {
                cumulative += count
                out.sample(
                    "haul_http_request_duration_seconds_bucket",
                    ["route": route, "le": PrometheusText.number(bound)], Double(cumulative))
            }
            out.sample(
                "haul_http_request_duration_seconds_bucket", ["route": route, "le": "+Inf"],
                Double(histogram.count))
            out.sample("haul_http_request_duration_seconds_sum", ["route": route], histogram.sum)
            out.sample("haul_http_request_duration_seconds_count", ["route": route], Double(histogram.count))
        }
        out.single(
            "haul_http_requests_answered_beside_total", type: "counter",
            help: "Status reads and pages of the list answered on the API's own loop from the answers the engine "
                + "published for downloads at rest, without a turn of the engine's loop (counted in "
                + "haul_http_requests_total too).",
            Double(answeredBeside))
    }
}

/// The Prometheus text exposition format (version 0.0.4).
struct PrometheusText {
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private(set) var text = ""

    mutating func family(_ name: String, type: String, help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    mutating func sample(_ name: String, _ labels: [String: String] = [:], _ value: Double) {
        text += name
        if !labels.isEmpty {
            text += "{"
            text += labels.keys.sorted().map { "\($0)=\"\(PrometheusText.escape(labels[$0]!))\"" }
                .joined(separator: ",")
            text += "}"
        }
        text += " \(PrometheusText.number(value))\n"
    }

    /// One gauge or counter family with a single unlabelled sample.
    mutating func single(_ name: String, type: String, help: String, _ value: Double) {
        family(name, type: type, help: help)
        sample(name, [:], value)
    }

    /// Integers without a fraction; others as Swift prints them (shortest round-trip form).
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    /// Label values escape backslash, double quote and newline.
    static func escape(_ value: String) -> String {
        var out = ""
        for c in value {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }
}

/// What the operating system says about this process, for the standard `process_*` metrics.
enum ProcessStats {
    /// Resident set size in bytes, from /proc/self/statm.
    static var residentBytes: Double? {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Double(fields[1]) else { return nil }
        return pages * Double(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// User plus system CPU time in seconds.
    static var cpuSeconds: Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Open file descriptors (each download connection and API client holds one).
    static var openDescriptors: Double? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map { Double($0.count) }
    }
}
