import HaulLoop
import XCTest

final class AddressPolicyTests: XCTestCase {
    private func bytes(_ text: String) -> [UInt8] { AddressPolicy.network(text)!.bytes }

    func testWhatIsNotPublic() {
        let table: [(String, String?)] = [
            ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("10.1.2.3", "private"),
            ("172.16.0.1", "private"), ("172.31.255.255", "private"), ("172.32.0.1", nil),
            ("192.168.1.1", "private"), ("169.254.169.254", "link-local"), ("100.64.0.1", "shared (carrier-grade NAT)"),
            ("0.0.0.0", "unspecified"), ("224.0.0.1", "multicast"), ("255.255.255.255", "reserved"),
            ("192.0.2.1", "reserved"), ("8.8.8.8", nil), ("1.1.1.1", nil), ("93.184.216.34", nil),
            ("::1", "loopback"), ("::", "unspecified"), ("fe80::1", "link-local"), ("fd00::1", "unique-local"),
            ("fc00::1", "unique-local"), ("ff02::1", "multicast"), ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link-local"), ("::ffff:8.8.8.8", nil), ("64:ff9b::10.0.0.1", "private"),
            ("2002:7f00:1::", "loopback"), ("2001:db8::1", "reserved"), ("2606:4700:4700::1111", nil),
            ("::127.0.0.1", "reserved"),
        ]
        for (address, reason) in table {
            XCTAssertEqual(AddressPolicy.reason(bytes(address)), reason, address)
            XCTAssertEqual(AddressPolicy().allows(bytes(address)), reason == nil, address)
        }
    }

    func testExceptionsByNetwork() {
        let policy = AddressPolicy(exceptions: [
            AddressPolicy.network("10.1.2.0/24")!,
            AddressPolicy.network("fd12::/16")!,
        ])
        XCTAssertTrue(policy.allows(bytes("10.1.2.200")))
        XCTAssertFalse(policy.allows(bytes("10.1.3.1")))
        XCTAssertTrue(policy.allows(bytes("fd12:3::1")))
        XCTAssertFalse(policy.allows(bytes("fd13::1")))
        XCTAssertFalse(policy.allows(bytes("127.0.0.1")))
        XCTAssertNil(AddressPolicy.network("10.0.0.0/33"))
        XCTAssertNil(AddressPolicy.network("example.com"))
        XCTAssertEqual(AddressPolicy.network("10.0.0.1")?.prefix, 32)
    }
}
