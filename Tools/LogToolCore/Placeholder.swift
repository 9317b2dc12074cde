import LogStore
