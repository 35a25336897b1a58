// The tools the account always allows, each with Revoke (DELETE /api/v1/account/tool-permissions/<tool>): the
// tool's next call is asked again. Then deleting the account from its page. The password is checked first (POST /api/v1/account/password-check), so a
// wrong one is said beside the field before anything is asked; then "for good?"; then DELETE /api/v1/account with
// {password}. Once deleted, the page logs out (which also forgets commands left unanswered here) to the login page,
// which says the account is being deleted.
(function () {
  "use strict";

  const granted = document.getElementById("tool-permissions");
  if (granted) {
    granted.addEventListener("click", async (event) => {
      const revoke = event.target.closest(".revoke-tool");
      if (!revoke) return;
      const item = revoke.closest("li");
      const problem = document.getElementById("tool-permissions-error");
      problem.hidden = true;
      revoke.disabled = true;
      const result = await ImpoApi.call("DELETE", `/api/v1/account/tool-permissions/${encodeURIComponent(item.dataset.toolName)}`);
      revoke.disabled = false;
      if (!result.ok && result.status !== 404) return ImpoUi.showError(problem, result.body);
      item.remove(); // revoked, or already gone elsewhere
      document.getElementById("tool-permissions-none").hidden = granted.children.length > 0;
      const next = granted.querySelector(".revoke-tool");
      (next || document.getElementById("tool-permissions-heading")).focus(); // the focus stays in the list
    });
  }

  const form = document.getElementById("delete-account");
  const password = document.getElementById("delete-password");
  const problem = document.getElementById("delete-account-error");
  if (!form) return;
  const DELETED_LANDING = "/login/?account=deleted";

  function refused(result) {
    password.setAttribute("aria-invalid", "true");
    if (result.body && result.body.error && result.body.error.code === "password_incorrect") {
      problem.textContent = "That is not your password. Nothing was deleted.";
      problem.hidden = false;
    } else {
      ImpoUi.showError(problem, result.body);
    }
    password.focus();
  }

  function logOutTo(url) {
    const logout = document.getElementById("logout");
    const next = document.createElement("input");
    next.type = "hidden";
    next.name = "next";
    next.value = url;
    logout.append(next);
    logout.requestSubmit();
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    problem.hidden = true;
    password.removeAttribute("aria-invalid");
    if (!password.value) {
      problem.textContent = "Type your password to confirm.";
      problem.hidden = false;
      password.setAttribute("aria-invalid", "true");
      password.focus();
      return;
    }
    const body = { password: password.value };
    const checked = await ImpoApi.call("POST", "/api/v1/account/password-check", body);
    if (!checked.ok) return refused(checked);
    if (!confirm("Delete your account and everything in it, for good?")) return;
    const result = await ImpoApi.call("DELETE", "/api/v1/account", body);
    if (!result.ok) return refused(result);
    logOutTo(DELETED_LANDING);
  });
})();
