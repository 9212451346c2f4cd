package templates_test

import (
	"testing"

	"tidings/internal/mjml"
	"tidings/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func testPool(t testing.TB) *mjml.Pool { return testenv.MJML(t) }
