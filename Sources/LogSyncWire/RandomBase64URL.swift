import Foundation

/// `count` random bytes from the system's generator in base64url without padding: the random
/// part of names both sides of the HTTP transport make up (bearer tokens, device IDs).
package func randomBase64URL(bytes count: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    return Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}
