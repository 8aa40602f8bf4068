// pulumi-language-python: the language host through which the Pulumi CLI runs a Python program.
//
// The module proxy does not serve upstream's host (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python),
// so this is a small one of the project's own. It runs the program the way upstream's does, through the
// pulumi-language-python-exec script from the sdk/v3 module next to this binary, with the Python of the project's
// virtualenv (runtime option `virtualenv`, relative to the project root), else $PULUMI_PYTHON_CMD, else python3.
// It reports no required plugins: the engine loads each provider when the program first uses it, from $PATH.
// It runs source-based plugins of runtime python (a PulumiPlugin.yaml folder, such as the project's component
// provider) as upstream's host does: the folder's __main__.py with the Python of the plugin's virtualenv.
// It installs no dependencies (`pulumi install`): the virtualenv is made beforehand.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	pbempty "google.golang.org/protobuf/types/known/emptypb"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
)

// version is set by the build (scripts/engine/build.sh) to the CLI's version.
var version = "dev"

// The exit code by which the exec script says it has already shown the user an actionable message.
const bailExitCode = 32

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	exec          string // the pulumi-language-python-exec script
	engineAddress string
}

// python is the interpreter for a program: the project's virtualenv's, else $PULUMI_PYTHON_CMD, else python3.
func python(info *pulumirpc.ProgramInfo) (cmd string, venv string) {
	if opts := info.GetOptions().AsMap(); opts != nil {
		if v, ok := opts["virtualenv"].(string); ok && v != "" {
			if !filepath.IsAbs(v) {
				v = filepath.Join(info.GetRootDirectory(), v)
			}
			return filepath.Join(v, "bin", "python"), v
		}
	}
	if c := os.Getenv("PULUMI_PYTHON_CMD"); c != "" {
		return c, ""
	}
	return "python3", ""
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	interpreter, venv := python(req.GetInfo())
	args := []string{"-u", h.exec}
	flag := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name, value)
		}
	}
	flag("monitor", req.GetMonitorAddress())
	flag("engine", h.engineAddress)
	flag("project", req.GetProject())
	flag("root_directory", req.GetInfo().GetRootDirectory())
	flag("stack", req.GetStack())
	flag("pwd", req.GetPwd())
	flag("dry_run", strconv.FormatBool(req.GetDryRun()))
	flag("parallel", strconv.Itoa(int(req.GetParallel())))
	flag("organization", req.GetOrganization())
	args = append(args, req.GetInfo().GetEntryPoint())
	args = append(args, req.GetArgs()...)

	// A stack without config gets none: the SDK reads PULUMI_CONFIG as a mapping, and fails on JSON null.
	configMap := req.GetConfig()
	if configMap == nil {
		configMap = map[string]string{}
	}
	config, err := json.Marshal(configMap)
	if err != nil {
		return nil, err
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secretKeysJSON, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, err
	}

	cmd := exec.CommandContext(ctx, interpreter, args...)
	cmd.Dir = req.GetInfo().GetProgramDirectory()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "PULUMI_CONFIG="+string(config), "PULUMI_CONFIG_SECRET_KEYS="+string(secretKeysJSON))
	if venv != "" {
		cmd.Env = append(cmd.Env, "VIRTUAL_ENV="+venv, "PATH="+filepath.Join(venv, "bin")+":"+os.Getenv("PATH"))
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second

	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return &pulumirpc.RunResponse{}, nil
	case errors.As(err, &exitErr):
		if status, ok := exitErr.Sys().(syscall.WaitStatus); ok && status.ExitStatus() == bailExitCode {
			return &pulumirpc.RunResponse{Bail: true}, nil
		}
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("program exited with non-zero exit code: %d",
			exitErr.ExitCode())}, nil
	default:
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("could not run %s: %v", interpreter, err)}, nil
	}
}

// RunPlugin runs a source-based plugin: `python <plugin folder> <args>` in the request's directory and
// environment, its output streamed back to the engine, then its exit code.
func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	interpreter, venv := python(req.GetInfo())
	dir := req.GetInfo().GetProgramDirectory()
	if dir == "" {
		dir = req.GetProgram()
	}
	cmd := exec.CommandContext(server.Context(), interpreter, append([]string{dir}, req.GetArgs()...)...)
	cmd.Dir = req.GetPwd()
	cmd.Env = req.GetEnv()
	if venv != "" {
		cmd.Env = append(cmd.Env, "VIRTUAL_ENV="+venv, "PATH="+filepath.Join(venv, "bin")+":"+os.Getenv("PATH"))
	}
	// One stream carries both outputs: a gRPC stream takes one Send at a time.
	var mu sync.Mutex
	send := func(out *pulumirpc.RunPluginResponse) error {
		mu.Lock()
		defer mu.Unlock()
		return server.Send(out)
	}
	cmd.Stdout = sender(func(b []byte) error {
		return send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stdout{Stdout: b}})
	})
	cmd.Stderr = sender(func(b []byte) error {
		return send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stderr{Stderr: b}})
	})
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second

	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exitErr):
		return send(&pulumirpc.RunPluginResponse{
			Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(exitErr.ExitCode())}})
	case venv != "":
		return fmt.Errorf("could not run plugin %s with %s (%w): create its virtualenv %s with the plugin's "+
			"requirements.txt installed", dir, interpreter, err, venv)
	default:
		return fmt.Errorf("could not run plugin %s with %s: %w", dir, interpreter, err)
	}
}

// sender is an io.Writer that sends each write to the engine.
type sender func([]byte) error

func (s sender) Write(b []byte) (int, error) {
	if err := s(append([]byte(nil), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (h *host) GetRequiredPlugins(context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *host) GetRequiredPackages(context.Context, *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

func (h *host) GetProgramDependencies(context.Context, *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	return &pulumirpc.GetProgramDependenciesResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *pbempty.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

func (h *host) InstallDependencies(*pulumirpc.InstallDependenciesRequest,
	pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	return nil
}

func (h *host) RuntimeOptionsPrompts(context.Context, *pulumirpc.RuntimeOptionsRequest,
) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

func (h *host) About(_ context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	interpreter, _ := python(req.GetInfo())
	return &pulumirpc.AboutResponse{Executable: interpreter}, nil
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(version)
		return
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
	h := &host{exec: filepath.Join(filepath.Dir(self), "pulumi-language-python-exec")}
	if _, err := os.Stat(h.exec); err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: missing %s next to this binary: %v\n", h.exec, err)
		os.Exit(1)
	}
	// The engine's address is the last argument; flags such as -tracing come before it. The host exits when the
	// engine is gone.
	cancel := make(chan bool)
	if n := len(os.Args); n > 1 {
		h.engineAddress = os.Args[n-1]
		if err := rpcutil.Healthcheck(context.Background(), h.engineAddress, 5*time.Minute,
			func() { close(cancel) }); err != nil {
			fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
			os.Exit(1)
		}
	}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: cancel,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, h)
			return nil
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
}
