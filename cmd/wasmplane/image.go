package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wasmplane/wasmplane/runtime/cri/images"
)

// newImage is `wasmplane image`: the built-in runtime's local image store.
func newImage() *cobra.Command {
	var root, dataDir string
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage the built-in runtime's local image store (WASI modules)",
		// --data-dir names the store the way `up --data-dir` does; --root names a runtime's
		// state directory directly (`wasmplane runtime --root`, an agent's ROOT/runtime).
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if f.Changed("root") && f.Changed("data-dir") {
				return errors.New("give --data-dir or --root, not both")
			}
			if !f.Changed("root") {
				root = filepath.Join(dataDir, "node", "runtime")
			}
			return nil
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&dataDir, "data-dir", ".wasmplane", "data dir of `wasmplane up`: the store of its node (DATA_DIR/node/runtime/images)")
	pf.StringVar(&root, "root", defaultRuntimeRoot, "runtime state directory instead (the store is ROOT/images), as `wasmplane runtime --root` takes")
	cmd.AddCommand(newImageImport(&root), newImageList(&root), newImageRemove(&root))
	return cmd
}

func newImageImport(root *string) *cobra.Command {
	var names []string
	cmd := &cobra.Command{
		Use:   "import FILE.wasm --name NAME[:TAG]",
		Short: "Import a WASI module as a container image",
		Long: "Import a WASI (wasip1) module into the store by the sha256 of its bytes and tag it.\n" +
			"Names are normalized like Docker's: `hello` is docker.io/library/hello:latest.\n" +
			"Without --name the file's base name (without .wasm) is used.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := images.Open(filepath.Join(*root, "images"))
			if err != nil {
				return err
			}
			if len(names) == 0 {
				names = []string{strings.TrimSuffix(filepath.Base(args[0]), ".wasm")}
			}
			im, err := store.ImportFile(cmd.Context(), args[0], names...)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %s (%d bytes) as %s\n", im.ID, im.Size, strings.Join(im.RepoTags, ", "))
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&names, "name", nil, "image name NAME[:TAG] (repeatable)")
	return cmd
}

func newImageList(root *string) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List stored images",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := images.Open(filepath.Join(*root, "images"))
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "IMAGE\tTAG\tIMAGE ID\tSIZE\tCREATED")
			for _, im := range store.List() {
				tags := im.RepoTags
				if len(tags) == 0 {
					tags = []string{"<none>:<none>"}
				}
				for _, t := range tags {
					repo, tag := t, ""
					if i := strings.LastIndexByte(t, ':'); i > 0 && !strings.Contains(t[i:], "/") {
						repo, tag = t[:i], t[i+1:]
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", repo, tag, im.Digest()[:12], humanSize(im.Size), im.Created.Local().Format(time.DateTime))
				}
			}
			return tw.Flush()
		},
	}
}

func newImageRemove(root *string) *cobra.Command {
	return &cobra.Command{
		Use:   "rm REF...",
		Short: "Remove images (with all their tags)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := images.Open(filepath.Join(*root, "images"))
			if err != nil {
				return err
			}
			for _, ref := range args {
				im, err := store.Resolve(ref)
				if err != nil {
					return err
				}
				if err := store.Remove(im.ID); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", im.ID)
			}
			return nil
		},
	}
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
