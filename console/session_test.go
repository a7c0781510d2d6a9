package console

import (
	"testing"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
)

// TestConsoleRanksRolesAsTheAPI: the console offers a button exactly when
// the API's ranking (auth.Role.Grants) lets the user's role press it. It
// used to rank author below operator, so an author, who may deploy and
// release, got no button at all.
func TestConsoleRanksRolesAsTheAPI(t *testing.T) {
	t.Parallel()
	roles := append([]auth.Role{auth.RoleNone}, auth.Roles...)
	for _, have := range roles {
		for _, need := range []auth.Role{auth.RoleRead, auth.RoleOperator, auth.RoleAuthor, auth.RoleAdmin} {
			global := &user{whoami: client.Whoami{Role: have.String()}}
			scoped := &user{whoami: client.Whoami{Role: "none", Environments: map[string]string{"prod": have.String()}}}
			want := have.Grants(need)
			if got := global.may("prod", need); got != want {
				t.Errorf("a global %s may press a %s button: %v, the API says %v", have, need, got, want)
			}
			if got := scoped.may("prod", need); got != want {
				t.Errorf("a %s in prod may press a %s button there: %v, the API says %v", have, need, got, want)
			}
			if scoped.may("staging", need) {
				t.Errorf("a %s of prod may press a %s button in staging", have, need)
			}
		}
	}
	if !(&user{whoami: client.Whoami{Role: "author"}}).may("prod", auth.RoleOperator) {
		t.Error("an author gets no operator button")
	}
}
