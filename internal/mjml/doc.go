// Package mjml compiles MJML to HTML with the official mjml npm package.
//
// A Pool keeps a few long-lived node processes running internal/mjml/node/worker.js and
// feeds them requests over stdin/stdout, one JSON object per line. Starting node
// and loading mjml takes hundreds of milliseconds; a warm process compiles a
// newsletter in tens of milliseconds, which is why the processes are kept.
//
// MJML is compiled at its strict validation level; whatever it rejects comes
// back as a *ValidationError carrying MJML's own messages. Includes
// (mj-include) are ignored, so templates cannot read files from the server.
//
// # Installing the node side
//
// The mjml version is pinned in internal/mjml/node/package.json and package-lock.json.
// node_modules is not committed; install it with
//
//	npm ci --prefix internal/mjml/node
//
// (the Makefile's build target runs this). NewPool fails with a message saying
// so when node or node_modules is missing, so the service refuses to start
// rather than failing on the first template save.
//
// # Finding the worker directory
//
// Options.Dir names the directory holding worker.js and node_modules. When it
// is empty, NewPool uses the MJML_DIR environment variable, then looks for
// mjml/node next to the executable (the container image), internal/mjml/node
// one directory above it (binaries built
// into bin/) and in the working directory, in that order.
package mjml
