import Foundation

/// `text` as one word for a POSIX shell: unchanged when it holds only characters no shell
/// treats specially, otherwise in single quotes (a `'` inside becomes `'\''`).
package func shellQuoted(_ text: String) -> String {
    let plain =
        !text.isEmpty
        && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return "/._-+:,@%".utf8.contains(byte)
            }
        }
    return plain ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
