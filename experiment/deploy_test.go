package experiment

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/retrystorm/retrystorm/grid"

	"go.yaml.in/yaml/v3"
)

// TestKubernetesIndexedJob checks the example manifest: an Indexed Job
// whose completions match the shard count its command passes, so that
// every shard runs once.
func TestKubernetesIndexedJob(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "deploy", "kubernetes", "sweep-indexed-job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		Kind string
		Spec struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int
			Template       struct {
				Spec struct {
					Containers []struct {
						Args []string
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &job); err != nil {
		t.Fatal(err)
	}
	if job.Kind != "Job" || job.Spec.CompletionMode != "Indexed" {
		t.Fatalf("kind %q, completionMode %q: want an Indexed Job", job.Kind, job.Spec.CompletionMode)
	}
	args := job.Spec.Template.Spec.Containers[0].Args[0]
	m := regexp.MustCompile(`--shard "\$\(\(JOB_COMPLETION_INDEX \+ 1\)\)/(\d+)"`).FindStringSubmatch(args)
	if m == nil {
		t.Fatalf("the command does not map the index to --shard: %q", args)
	}
	if n, _ := strconv.Atoi(m[1]); n != job.Spec.Completions {
		t.Errorf("--shard i/%d with %d completions: shards would be missing or run twice", n, job.Spec.Completions)
	}
	if _, err := grid.ParseShard(strconv.Itoa(job.Spec.Completions) + "/" + m[1]); err != nil {
		t.Errorf("the last shard: %v", err)
	}
}
