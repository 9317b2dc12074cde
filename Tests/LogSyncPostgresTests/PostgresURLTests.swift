import LogSyncPostgres
import Testing

/// The URL parser: the forms a server flag takes, and the message each mistake gets.
@Suite struct PostgresURLTests {
    /// Every part is read, percent escapes decoded, and the port defaults to 5432.
    @Test func parsesFullAndShortForms() throws {
        let full = try PostgresURL("postgres://alice:s%40cret@db.example.com:6543/logsync")
        #expect(full.user == "alice")
        #expect(full.password == "s@cret")
        #expect(full.host == "db.example.com")
        #expect(full.port == 6543)
        #expect(full.database == "logsync")

        let short = try PostgresURL("postgresql://bob@127.0.0.1/db")
        #expect(short.user == "bob" && short.password == nil && short.port == 5432 && short.database == "db")

        let ipv6 = try PostgresURL("postgres://u@[::1]:5433/d")
        #expect(ipv6.host == "::1" && ipv6.port == 5433)
    }

    /// Several hosts, each with its port or 5432, and libpq's `target_session_attrs` (`any`
    /// without one); other parameters are left alone.
    @Test func parsesSeveralHostsAndTargetSessionAttributes() throws {
        let url = try PostgresURL(
            "postgres://u:pw@db1:5433,db2,[::1]:6000/logsync?sslmode=disable&target_session_attrs=read-write")
        #expect(
            url.hosts == [
                PostgresHost(host: "db1", port: 5433), PostgresHost(host: "db2", port: 5432),
                PostgresHost(host: "::1", port: 6000),
            ])
        #expect(url.targetSessionAttributes == .readWrite)
        #expect(url.host == "db1" && url.port == 5433 && url.database == "logsync")
        #expect(
            url.description == "postgres://u:***@db1:5433,db2:5432,[::1]:6000/logsync?target_session_attrs=read-write")
        #expect(try PostgresURL("postgres://u@h/d").targetSessionAttributes == .any)
        for attributes in PostgresTargetSessionAttributes.allCases {
            #expect(
                try PostgresURL("postgres://u@h/d?target_session_attrs=\(attributes.rawValue)").targetSessionAttributes
                    == attributes)
        }
    }

    /// The description, which servers log, never shows the password.
    @Test func descriptionHidesThePassword() throws {
        let url = try PostgresURL("postgres://alice:hunter2@db:5432/logsync")
        #expect(url.description == "postgres://alice:***@db:5432/logsync")
        #expect(!url.description.contains("hunter2"))
    }

    /// Each malformed URL fails with a message naming the wrong part, password hidden.
    @Test(arguments: [
        ("mysql://u@h/d", "scheme"),
        ("postgres://u@h", "database"),
        ("postgres://u@h/", "database"),
        ("postgres://h/d", "user@"),
        ("postgres://:pw@h/d", "user name is empty"),
        ("postgres://u@/d", "host is empty"),
        ("postgres://u@h:99999/d", "port"),
        ("postgres://u@h:abc/d", "port"),
        ("postgres://u%zz@h/d", "percent"),
        ("postgres://u@h1,/d", "host 2 of 2 is empty"),
        ("postgres://u@,h2/d", "host 1 of 2 is empty"),
        ("postgres://u@h1:5432,h2:0/d", "port"),
        ("postgres://u@h1,[::1/d", "no closing ]"),
        ("postgres://u@h/d?target_session_attrs=readwrite", "target_session_attrs \"readwrite\" is not one of"),
        ("postgres://u@h/d?target_session_attrs", "has no =value"),
    ])
    func rejectsBadURLs(text: String, problem: String) {
        #expect {
            try PostgresURL(text)
        } throws: { error in
            guard let error = error as? PostgresURLError else { return false }
            return error.problem.contains(problem) && error.description.contains("invalid PostgreSQL URL")
        }
    }

    /// A bad URL's error hides its password too.
    @Test func errorHidesThePassword() {
        #expect {
            try PostgresURL("postgres://u:hunter2@h:port/d")
        } throws: { error in
            "\(error)".contains("u:***@h") && !"\(error)".contains("hunter2")
        }
    }
}
