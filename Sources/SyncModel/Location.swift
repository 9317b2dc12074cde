import Foundation

/// A place on Earth as a record field holds it (CloudKit's `CLLocation` field values, F129):
/// coordinates in degrees, altitude and accuracies in metres, course in degrees, speed in metres
/// per second, and when it was measured.
///
/// As in `CLLocation`, a negative accuracy, course or speed means "not known". `Record.validate()`
/// refuses what no measurement gives: a latitude outside −90…90, a longitude outside −180…180,
/// a course of 360 or more, and any value that is not finite.
///
/// ```swift
/// note["where"] = .location(Location(latitude: 48.8584, longitude: 2.2945, altitude: 35))
/// ```
public struct Location: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Degrees north of the equator, −90 to 90.
    public var latitude: Double
    /// Degrees east of Greenwich, −180 to 180.
    public var longitude: Double
    /// Metres above sea level.
    public var altitude: Double
    /// The radius of uncertainty of the coordinates, in metres; negative: not known.
    public var horizontalAccuracy: Double
    /// The uncertainty of the altitude, in metres; negative: not known.
    public var verticalAccuracy: Double
    /// The direction of travel in degrees from true north, 0 up to 360; negative: not known.
    public var course: Double
    /// Metres per second; negative: not known.
    public var speed: Double
    /// When the location was measured (kept to the microsecond).
    public var timestamp: Date

    public init(
        latitude: Double, longitude: Double, altitude: Double = 0, horizontalAccuracy: Double = 0,
        verticalAccuracy: Double = -1, course: Double = -1, speed: Double = -1,
        timestamp: Date = Date(timeIntervalSince1970: 0)
    ) {
        self.latitude = latitude
        self.longitude = longitude
        self.altitude = altitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.course = course
        self.speed = speed
        self.timestamp = timestamp
    }

    /// `48.8584,2.2945 ±0 m, 35 m`.
    public var description: String {
        "\(latitude),\(longitude) ±\(horizontalAccuracy) m, \(altitude) m"
    }

    /// What is wrong with the location, or `nil` when it could have been measured.
    var violation: String? {
        let named: [(String, Double)] = [
            ("latitude", latitude), ("longitude", longitude), ("altitude", altitude),
            ("horizontalAccuracy", horizontalAccuracy),
            ("verticalAccuracy", verticalAccuracy), ("course", course), ("speed", speed),
            ("timestamp", timestamp.timeIntervalSince1970),
        ]
        if let (name, value) = named.first(where: { !$0.1.isFinite }) {
            return "location \(name) is \(value), not a finite number"
        }
        if !(-90...90).contains(latitude) { return "location latitude \(latitude) is outside −90…90" }
        if !(-180...180).contains(longitude) { return "location longitude \(longitude) is outside −180…180" }
        if course >= 360 {
            return "location course \(course) is 360 or more (degrees from north, 0 up to 360; negative: not known)"
        }
        return nil
    }
}
