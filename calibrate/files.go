package calibrate

import "os"

func tempDir() (string, error)                 { return os.MkdirTemp("", "retrystorm-calibrate-") }
func removeAll(dir string)                     { _ = os.RemoveAll(dir) }
func writeFile(name string, data []byte) error { return os.WriteFile(name, data, 0o644) }
