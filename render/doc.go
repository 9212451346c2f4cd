// Package render turns a template's stored source into per-recipient
// messages: it sanitises and compiles templates when they are saved
// (Prepare), finds the variables they read (RequiredVariables), and renders
// subject, HTML and text for each send from a per-version cache of parsed
// Liquid templates (Renderer). The only I/O is the MJML compiler Prepare is
// given.
package render
