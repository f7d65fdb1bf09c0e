// Package deploy holds the tests of the deployment files: the image every
// Kubernetes Job runs (Dockerfile) and the Jobs (kubernetes/).
package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDockerfile: multi-stage, a distroless final stage (no shell), a user
// that is not root, and an entrypoint that needs no shell.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms, users []string
	var entry string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "FROM":
			froms = append(froms, f[1])
		case "USER":
			users = append(users, f[1])
		case "ENTRYPOINT":
			entry = strings.Join(f[1:], " ")
		}
	}
	if len(froms) < 2 || !strings.HasPrefix(froms[0], "golang:") {
		t.Errorf("stages %q: want a golang build stage and a runtime one", froms)
	}
	if last := froms[len(froms)-1]; !strings.HasPrefix(last, "gcr.io/distroless/static") || strings.Contains(last, "debug") {
		t.Errorf("final stage %q: want distroless static, without a shell", last)
	}
	for _, u := range users {
		if u == "root" || strings.HasPrefix(u, "0") {
			t.Errorf("USER %s: want a user that is not root", u)
		}
	}
	if len(users) == 0 {
		t.Error("no USER: the image would run as root")
	}
	if !strings.HasPrefix(entry, "[") {
		t.Errorf("ENTRYPOINT %s: want the exec form (no shell)", entry)
	}
}

// TestDockerfileBuilds runs the Dockerfile's go build steps, exactly as
// written (CGO_ENABLED=0 from its ENV), from the module's root, and checks
// the binaries are static: what the image would hold, where no container
// engine is.
func TestDockerfileBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both commands from scratch (-trimpath): skipped with -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the image is Linux's")
	}
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	builds := regexp.MustCompile(`(?m)^RUN (go build .*)$`).FindAllStringSubmatch(string(data), -1)
	if len(builds) != 2 {
		t.Fatalf("%d go build steps, want 2 (retrystorm and retrystorm-full)", len(builds))
	}
	for _, b := range builds {
		args := strings.Fields(strings.ReplaceAll(b[1], "/out/", out+"/"))
		cmd := exec.Command("go", args[1:]...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", b[1], err, msg)
		}
	}
	for _, name := range []string{"retrystorm", "retrystorm-full"} {
		f, err := elf.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked: the distroless static image has no libc", name)
			}
		}
		f.Close()
	}
}

// TestLabShardsJob: the lab's Indexed Job runs as many shards as it has
// completions, with the index from the Job (no shell), from the image.
func TestLabShardsJob(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("kubernetes", "lab-shards-job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		Kind string
		Spec struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int
			Parallelism    int
			Template       struct {
				Spec struct {
					Containers []struct {
						Image   string
						Command []string
						Args    []string
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &job); err != nil {
		t.Fatal(err)
	}
	s := job.Spec
	if job.Kind != "Job" || s.CompletionMode != "Indexed" || s.Parallelism != s.Completions {
		t.Fatalf("kind %q, completionMode %q, parallelism %d of %d: want an Indexed Job, all at once (the shards keep one schedule)", job.Kind, s.CompletionMode, s.Parallelism, s.Completions)
	}
	c := s.Template.Spec.Containers[0]
	if c.Image != "retrystorm:latest" || len(c.Command) != 1 || strings.Contains(c.Command[0], "sh") {
		t.Errorf("image %q, command %q: want the image's retrystorm-full, no shell", c.Image, c.Command)
	}
	args := strings.Join(c.Args, " ")
	m := regexp.MustCompile(`--shard=job/(\d+)`).FindStringSubmatch(args)
	if m == nil || !strings.Contains(args, "--target=") || !strings.Contains(args, "--json") {
		t.Fatalf("args %q: want lab --target ... --shard=job/N --json", args)
	}
	if n, _ := strconv.Atoi(m[1]); n != s.Completions {
		t.Errorf("--shard job/%d with %d completions", n, s.Completions)
	}
}
