package sanitize

// What the tests of the rendering pipeline (corpus_test.go, package
// sanitize_test, which imports render) share with the sanitiser's own.
var (
	FindScript   = findScript
	FindDanger   = findDanger
	CDATAVectors = cdataVectors
	LoadCorpus   = loadCorpus
)

// XSSInputs and KeptInputs are the inputs of xssVectors and keptVerbatim.
func XSSInputs() []string {
	out := make([]string, len(xssVectors))
	for i, v := range xssVectors {
		out[i] = v.in
	}
	return out
}

func KeptInputs() []string {
	out := make([]string, len(keptVerbatim))
	for i, v := range keptVerbatim {
		out[i] = v.in
	}
	return out
}
