from django.urls import path

from accounts.views import (
    AccountView,
    ExportView,
    InstructionsView,
    PasswordCheckView,
    ToolPermissionsView,
    ToolPermissionView,
)

urlpatterns = [
    path("export", ExportView.as_view(), name="export"),
    path("account", AccountView.as_view(), name="account"),
    path("account/instructions", InstructionsView.as_view(), name="account-instructions"),
    path("account/password-check", PasswordCheckView.as_view(), name="account-password-check"),
    path("account/tool-permissions", ToolPermissionsView.as_view(), name="account-tool-permissions"),
    path("account/tool-permissions/<str:tool_name>", ToolPermissionView.as_view(), name="account-tool-permission"),
]
